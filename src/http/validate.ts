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
  const result = schema.validate(input, OPTIONS);
  if (result.error === undefined) return result.value as T;
  const errors: FieldError[] = result.error.details.map((detail) => ({ path: fieldPath(detail.path), message: detail.message }));
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more problem${errors.length > 2 ? 's' : ''})` : '';
  throw new ApiError('VALIDATION_FAILED', `${errors[0]?.message ?? 'invalid request'}${more}.`, { errors });
}

/** ['data', 1, 'columnValue'] -> 'data[1].columnValue' */
export function fieldPath(path: ReadonlyArray<string | number>): string {
  return path.reduce<string>((text, part) => {
    if (typeof part === 'number') return `${text}[${part}]`;
    return text === '' ? part : `${text}.${part}`;
  }, '');
}
