import type Joi from 'joi';
import { ApiError, type FieldError } from '../service/errors.ts';

const OPTIONS: Joi.ValidationOptions = {
  abortEarly: false,
  // Types are taken as sent: "5" is not a number, and nothing is trimmed or coerced.
  convert: false,
  errors: { wrap: { label: false } },
};

/**
 * validate checks input against a request schema and returns it, or throws VALIDATION_FAILED
 * with one entry per problem, each naming its field path (`data[1].columnValue`).
 */
export function validate<T>(schema: Joi.Schema, input: unknown): T {
  const { value, errors } = validationErrors<T>(schema, input);
  if (errors.length === 0) return value;
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more problem${errors.length > 2 ? 's' : ''})` : '';
  throw new ApiError('VALIDATION_FAILED', `${errors[0]?.message ?? 'invalid request'}${more}.`, { errors });
}

/**
 * validationErrors checks input against a request schema and returns the valid value (as the
 * schema leaves it) and every problem by field path. `context` is the schema's $-references and
 * custom rules' view of the rest of the request.
 */
export function validationErrors<T>(schema: Joi.Schema, input: unknown, context?: Record<string, unknown>): { value: T; errors: FieldError[] } {
  const result = schema.validate(input, context === undefined ? OPTIONS : { ...OPTIONS, context });
  const errors: FieldError[] = (result.error?.details ?? []).map((detail) => ({ path: fieldPath(detail.path), message: detail.message }));
  return { value: result.value as T, errors };
}

/** ['data', 1, 'columnValue'] -> 'data[1].columnValue' */
export function fieldPath(path: ReadonlyArray<string | number>): string {
  return path.reduce<string>((text, part) => {
    if (typeof part === 'number') return `${text}[${part}]`;
    return text === '' ? part : `${text}.${part}`;
  }, '');
}
