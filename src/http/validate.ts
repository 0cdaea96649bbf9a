import type Joi from 'joi';
import { ApiError, type FieldError } from '../service/errors.ts';
import { shorten } from './quoted.ts';

/** Most problems a VALIDATION_FAILED answer lists; `errorCount` says how many there were in all. */
export const MAX_REPORTED_ERRORS = 20;

/**
 * Values of at most this many nodes are checked by joi in one pass. Larger ones are taken apart
 * (members, items) first: joi keeps every problem of a pass in memory, and spreads them onto
 * the stack of its caller, which overflows at about 10^5.
 */
export const WHOLE_PASS_NODES = 1000;

const BASE: Joi.ValidationOptions = {
  // Types are taken as sent: "5" is not a number, and nothing is trimmed or coerced.
  convert: false,
  errors: { wrap: { label: false } },
};
const FIRST_PROBLEM: Joi.ValidationOptions = { ...BASE, abortEarly: true };
const EVERY_PROBLEM: Joi.ValidationOptions = { ...BASE, abortEarly: false };
// Once the report lists all it will, problems are only counted: joi then skips wording them.
const COUNT_PROBLEMS: Joi.ValidationOptions = { ...BASE, abortEarly: false, errors: { render: false } };

type Path = ReadonlyArray<string | number>;
/** Options a request part adds to every pass: its context. */
type Prefs = Pick<Joi.ValidationOptions, 'context'>;

/**
 * validate checks input against a request schema and returns it, or throws VALIDATION_FAILED
 * listing the first MAX_REPORTED_ERRORS problems, each naming its field path
 * (`data[1].columnValue`), with `errorCount` when there were more. Time and memory are linear in
 * the size of the input whatever it holds, and the answer stays a few kilobytes.
 *
 * Valid input takes one joi pass that stops at the first problem. Only invalid input is looked at
 * again, to list its problems: a long array item by item, an object member by member. So a rule
 * of an array item may look at that item only (its ancestors are not those of the whole input),
 * and an array's own rules (uniqueness, say) are reported once its items are valid.
 */
export function validate<T>(schema: Joi.Schema, input: unknown, bounds: ValidationBounds = VALIDATION_BOUNDS): T {
  const [value] = validateParts([{ schema, value: input }], bounds) as [T];
  return value;
}

/** One part of a request (path parameters, query, body) and its schema. */
export interface RequestPart {
  readonly schema: Joi.Schema;
  readonly value: unknown;
  /** What the schema's custom rules may see of the rest of the request (`helpers.prefs.context`). */
  readonly context?: Record<string, unknown>;
}

/**
 * validateParts checks several parts of one request as validate checks one, and returns their
 * valid values in order, or throws one VALIDATION_FAILED listing the problems of all of them.
 * Problems are named by their path within their part.
 */
export function validateParts(parts: readonly RequestPart[], bounds: ValidationBounds = VALIDATION_BOUNDS): unknown[] {
  const values: unknown[] = [];
  let report: ProblemReport | undefined;
  for (const part of parts) {
    const prefs = part.context === undefined ? {} : { context: part.context };
    const first = part.schema.validate(part.value, { ...FIRST_PROBLEM, ...prefs });
    values.push(first.value);
    if (first.error === undefined) continue;
    report ??= new ProblemReport(bounds);
    const before = report.count;
    collect(part.schema, part.value, [], report, prefs);
    if (report.count === before) report.addAll(first.error, []);
  }
  if (report !== undefined) throw report.toError();
  return values;
}

export interface ValidationBounds {
  /** Most problems listed. */
  readonly maxReported: number;
  /** Largest value (in nodes) checked in one joi pass that lists every problem. */
  readonly wholePassNodes: number;
}

export const VALIDATION_BOUNDS: ValidationBounds = Object.freeze({ maxReported: MAX_REPORTED_ERRORS, wholePassNodes: WHOLE_PASS_NODES });

/** The first problems found, and how many in all. */
class ProblemReport {
  readonly bounds: ValidationBounds;
  readonly listed: FieldError[] = [];
  count = 0;

  constructor(bounds: ValidationBounds) {
    this.bounds = bounds;
  }

  /** Whether the report lists all it will: later problems are only counted. */
  get full(): boolean {
    return this.listed.length >= this.bounds.maxReported;
  }

  /** The joi options for a pass that looks for every problem. */
  everyProblem(prefs: Prefs): Joi.ValidationOptions {
    return { ...(this.full ? COUNT_PROBLEMS : EVERY_PROBLEM), ...prefs };
  }

  add(problem: FieldError): void {
    this.count += 1;
    if (this.listed.length < this.bounds.maxReported) this.listed.push({ path: shorten(problem.path), message: shorten(problem.message) });
  }

  /** Counts problems that are not listed (the report is full). */
  addUnlisted(count: number): void {
    this.count += count;
  }

  /** Adds joi's problems with a value found at `prefix`, naming them by their full path. */
  addAll(error: Joi.ValidationError | undefined, prefix: Path, skip?: (path: Path) => boolean): void {
    for (const detail of error?.details ?? []) {
      if (skip?.(detail.path)) continue;
      if (this.full) {
        this.count += 1;
        continue;
      }
      this.add({ path: fieldPath([...prefix, ...detail.path]), message: relabel(detail, prefix) });
    }
  }

  toError(): ApiError {
    const [first] = this.listed;
    const more = this.count > 1 ? ` (and ${this.count - 1} more problem${this.count > 2 ? 's' : ''})` : '';
    const counted = this.count > this.listed.length ? { errorCount: this.count } : {};
    return new ApiError('VALIDATION_FAILED', `${first?.message ?? 'invalid request'}${more}.`, { errors: this.listed, ...counted });
  }
}

/** Adds the problems of `value` at `path` to the report, taking large values apart. */
function collect(schema: Joi.Schema, value: unknown, path: Path, report: ProblemReport, prefs: Prefs): void {
  if (hasAtMostNodes(value, report.bounds.wholePassNodes)) {
    report.addAll(schema.validate(value, report.everyProblem(prefs)).error, path);
  } else if (schema.type === 'array' && Array.isArray(value)) {
    collectArray(schema, value, path, report, prefs);
  } else if (schema.type === 'object' && isPlainObject(value) && isClosed(schema)) {
    collectObject(schema, value, path, report, prefs);
  } else {
    // A large value of the wrong kind is one problem, however large.
    report.addAll(schema.validate(value, { ...FIRST_PROBLEM, ...prefs }).error, path);
  }
}

function collectArray(schema: Joi.Schema, value: unknown[], path: Path, report: ProblemReport, prefs: Prefs): void {
  const limit: unknown = schema.$_getRule('max')?.args?.['limit'];
  if (typeof limit === 'number' && value.length > limit) {
    // Its items are not looked at: the array is refused whatever they are.
    report.add({ path: fieldPath(path), message: `${fieldPath(path) || 'value'} must contain less than or equal to ${limit} items` });
    return;
  }
  const items = schema.$_terms['items'] as Joi.Schema[];
  const item = items.length === 1 && (schema.$_terms['ordered'] as unknown[]).length === 0 ? items[0] : undefined;
  if (item === undefined) {
    report.addAll(schema.validate(value, { ...FIRST_PROBLEM, ...prefs }).error, path);
    return;
  }
  const before = report.count;
  for (const [index, element] of value.entries()) collect(item, element, [...path, index], report, prefs);
  // The items are valid: what is left are the array's own rules, a few problems at most.
  if (report.count === before) report.addAll(schema.validate(value, report.everyProblem(prefs)).error, path);
}

function collectObject(schema: Joi.Schema, value: Record<string, unknown>, path: Path, report: ProblemReport, prefs: Prefs): void {
  const members = memberSchemas(schema);
  // The object is checked whole with its small members; each large one stands in as null (present,
  // for rules between members) and is checked on its own.
  const shallow: Record<string, unknown> = {};
  const large: string[] = [];
  let unknown = 0;
  for (const key of Object.keys(value)) {
    const member = value[key];
    if (!members.has(key)) {
      unknown += 1;
      // Each unknown key is one problem, listed by joi while the report has room, else only counted.
      if (unknown > report.bounds.maxReported) {
        report.addUnlisted(1);
        continue;
      }
      Object.defineProperty(shallow, key, { value: null, enumerable: true, writable: true, configurable: true });
    } else if (hasAtMostNodes(member, report.bounds.wholePassNodes)) {
      Object.defineProperty(shallow, key, { value: member, enumerable: true, writable: true, configurable: true });
    } else {
      large.push(key);
      Object.defineProperty(shallow, key, { value: null, enumerable: true, writable: true, configurable: true });
    }
  }
  report.addAll(schema.validate(shallow, report.everyProblem(prefs)).error, path, (problemPath) => large.includes(String(problemPath[0])));
  for (const key of large) collect(members.get(key) as Joi.Schema, value[key], [...path, key], report, prefs);
}

const memberCache = new WeakMap<Joi.Schema, Map<string, Joi.Schema>>();

/** The schemas of an object schema's members, by key. */
function memberSchemas(schema: Joi.Schema): Map<string, Joi.Schema> {
  let members = memberCache.get(schema);
  if (members === undefined) {
    const keys = (schema.$_terms['keys'] ?? []) as Array<{ key: string; schema: Joi.Schema }>;
    members = new Map(keys.map((child) => [child.key, child.schema]));
    memberCache.set(schema, members);
  }
  return members;
}

/** Whether an object schema refuses keys it does not name (so they can be counted without joi). */
function isClosed(schema: Joi.Schema): boolean {
  return schema._flags['unknown'] !== true && ((schema.$_terms['patterns'] ?? []) as unknown[]).length === 0 && schema.$_terms['keys'] !== null;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether `value` has at most `budget` nodes (objects, arrays and scalars); stops counting past it. */
function hasAtMostNodes(value: unknown, budget: number): boolean {
  const pending: unknown[] = [value];
  let count = 0;
  while (pending.length > 0) {
    const node = pending.pop();
    count += 1;
    if (count > budget) return false;
    if (typeof node === 'object' && node !== null) {
      const children = Array.isArray(node) ? node : Object.values(node);
      if (count + pending.length + children.length > budget) return false;
      for (const child of children) pending.push(child);
    }
  }
  return true;
}

/**
 * The message of a problem found in a value checked apart from its ancestors, as joi would have
 * worded it in place: joi names a field by its path unless the schema has a label of its own.
 */
function relabel(detail: Joi.ValidationErrorItem, prefix: Path): string {
  if (prefix.length === 0) return detail.message;
  const local = fieldPath(detail.path) || 'value';
  if (detail.context?.label !== local || !detail.message.startsWith(local)) return detail.message;
  return `${fieldPath([...prefix, ...detail.path])}${detail.message.slice(local.length)}`;
}

/** ['data', 1, 'columnValue'] -> 'data[1].columnValue' */
export function fieldPath(path: ReadonlyArray<string | number>): string {
  return path.reduce<string>((text, part) => {
    if (typeof part === 'number') return `${text}[${part}]`;
    return text === '' ? part : `${text}.${part}`;
  }, '');
}
