import Joi from 'joi';
import { ApiError, type FieldError } from '../../service/errors.ts';
import { Turns } from '../../lib/turns.ts';
import { precheckOf } from './precheck.ts';
import { shorten } from '../../service/text.ts';

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

/** A part with no context: the options above as they are, not a copy per pass. */
const NO_PREFS: Pick<Joi.ValidationOptions, 'context'> = Object.freeze({});

type Path = ReadonlyArray<string | number>;

/**
 * validate checks input against a request schema and resolves to it, or rejects with
 * VALIDATION_FAILED listing the first MAX_REPORTED_ERRORS problems, each naming its field path
 * (`data[1].columnValue`), with `errorCount` when there were more. Time and memory are linear in
 * the size of the input whatever it holds, the answer stays a few kilobytes, and a large input
 * never holds the event loop for more than a few milliseconds at a time.
 *
 * Input of up to WHOLE_PASS_NODES nodes takes one joi pass. Larger input is taken apart (array
 * items, object members) and checked by joi part by part, consecutive small array items together
 * in passes of up to WHOLE_PASS_NODES nodes, yielding between them. So a rule
 * of an array item may look at that item only: its ancestors are not those of the whole input.
 */
export async function validate<T>(schema: Joi.Schema, input: unknown, bounds: ValidationBounds = VALIDATION_BOUNDS): Promise<T> {
  const [value] = (await validateParts([{ schema, value: input }], bounds)) as [T];
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
 * validateParts checks several parts of one request as validate checks one, and resolves to
 * their valid values in order, or rejects with one VALIDATION_FAILED listing the problems of all
 * of them. Problems are named by their path within their part.
 */
export async function validateParts(parts: readonly RequestPart[], bounds: ValidationBounds = VALIDATION_BOUNDS): Promise<unknown[]> {
  // The common, valid request is found valid without a joi pass; anything else gets one.
  const prechecked = allPrechecked(parts, bounds);
  if (prechecked !== undefined) return prechecked;
  const report = new ProblemReport(bounds);
  // A yield every few milliseconds of checking.
  const turns = new Turns();
  const values: unknown[] = [];
  for (const part of parts) {
    report.prefs = part.context === undefined ? NO_PREFS : { context: part.context };
    if (hasAtMostNodes(part.value, bounds.wholePassNodes)) {
      const first = part.schema.validate(part.value, report.firstProblem);
      values.push(first.value);
      if (first.error !== undefined) report.addAll(part.schema.validate(part.value, report.everyProblem).error, []);
    } else {
      // A large part starts after a yield: it was just parsed, in a slice of its own.
      await turns.next();
      values.push(await collect(part.schema, part.value, [], report, turns));
    }
  }
  if (report.count > 0) throw report.toError();
  return values;
}

/** The parts' values as they are, if every part is small and passes its precheck (precheck.ts); else undefined. */
function allPrechecked(parts: readonly RequestPart[], bounds: ValidationBounds): unknown[] | undefined {
  const values: unknown[] = [];
  for (const part of parts) {
    const check = precheckOf(part.schema);
    // The part is the check's options: its context is all a check reads of them.
    if (check === undefined || !hasAtMostNodes(part.value, bounds.wholePassNodes) || !check(part.value, part)) return undefined;
    values.push(part.value);
  }
  return values;
}

export interface ValidationBounds {
  /** Most problems listed. */
  readonly maxReported: number;
  /** Largest value (in nodes) checked in one joi pass. */
  readonly wholePassNodes: number;
}

export const VALIDATION_BOUNDS: ValidationBounds = Object.freeze({ maxReported: MAX_REPORTED_ERRORS, wholePassNodes: WHOLE_PASS_NODES });

/** The first problems found, and how many in all. */
class ProblemReport {
  readonly bounds: ValidationBounds;
  readonly listed: FieldError[] = [];
  count = 0;
  /** Options of the part being checked: its context. */
  prefs: Pick<Joi.ValidationOptions, 'context'> = NO_PREFS;

  constructor(bounds: ValidationBounds) {
    this.bounds = bounds;
  }

  /** Whether the report lists all it will: later problems are only counted. */
  get full(): boolean {
    return this.listed.length >= this.bounds.maxReported;
  }

  /** The joi options for a pass that looks for every problem. */
  get everyProblem(): Joi.ValidationOptions {
    const options = this.full ? COUNT_PROBLEMS : EVERY_PROBLEM;
    return this.prefs === NO_PREFS ? options : { ...options, ...this.prefs };
  }

  /** The joi options for a pass that stops at the first problem. */
  get firstProblem(): Joi.ValidationOptions {
    return this.prefs === NO_PREFS ? FIRST_PROBLEM : { ...FIRST_PROBLEM, ...this.prefs };
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

  /**
   * Adds the problems of a pass over a run of an array's items that starts at position `offset`
   * of the array at `path`, naming them by their place in the whole array.
   */
  addAllItems(error: Joi.ValidationError | undefined, path: Path, offset: number): void {
    for (const detail of error?.details ?? []) {
      if (this.full) {
        this.count += 1;
        continue;
      }
      const [position, ...rest] = detail.path;
      const at = [...path, offset + Number(position), ...rest];
      this.add({ path: fieldPath(at), message: renamed(detail, fieldPath(detail.path), at) });
    }
  }

  toError(): ApiError {
    const [first] = this.listed;
    const more = this.count > 1 ? ` (and ${this.count - 1} more problem${this.count > 2 ? 's' : ''})` : '';
    const counted = this.count > this.listed.length ? { errorCount: this.count } : {};
    return new ApiError('VALIDATION_FAILED', `${first?.message ?? 'invalid request'}${more}.`, { errors: this.listed, ...counted });
  }
}

/** What an item-wise rule finds at the first item that breaks it: a joi error code and the values its message names. */
export interface ItemProblem {
  readonly code: string;
  readonly local?: Record<string, unknown>;
}

/** One run of an item-wise rule: it is given an array's items in order, and answers at the first that breaks the rule. */
export type ItemCheck = (item: unknown, index: number) => ItemProblem | undefined;

interface FoundProblem extends ItemProblem {
  readonly index: number;
}

type CustomMethod = Joi.CustomValidator<unknown[]>;

const itemwiseStarts = new WeakMap<CustomMethod, () => ItemCheck>();
/** What collectArray's slices found, by array and rule (undefined: nothing), for the rule's joi pass to report. */
const foundInSlices = new WeakMap<readonly unknown[], Map<CustomMethod, FoundProblem | undefined>>();

/**
 * itemwise makes a joi custom rule of a whole array (`.custom(itemwise(start))`) out of a check
 * that looks at one item at a time. A joi pass runs it over every item at once. When validate
 * takes a large array apart, it runs the check on each item as it goes, between slices, so a rule
 * over 100,000 items does not hold the event loop either; the rule's joi pass then only reports
 * what was found, with the schema's own messages.
 */
export function itemwise(start: () => ItemCheck): CustomMethod {
  const rule: CustomMethod = (items, helpers) => {
    const sliced = foundInSlices.get(items);
    const found = sliced?.has(rule) ? sliced.get(rule) : firstProblem(start(), items);
    if (found === undefined) return items;
    return helpers.error(found.code, found.local, { ...helpers.state, path: [...(helpers.state.path ?? []), found.index] });
  };
  itemwiseStarts.set(rule, start);
  return rule;
}

function firstProblem(check: ItemCheck, items: readonly unknown[]): FoundProblem | undefined {
  for (let index = 0; index < items.length; index++) {
    const problem = check(items[index], index);
    if (problem !== undefined) return { ...problem, index };
  }
  return undefined;
}

const itemwiseCache = new WeakMap<Joi.Schema, ReadonlyArray<readonly [CustomMethod, () => ItemCheck]>>();

/** An array schema's item-wise rules, each with what starts a run of it. */
function itemwiseRules(schema: Joi.Schema): ReadonlyArray<readonly [CustomMethod, () => ItemCheck]> {
  let rules = itemwiseCache.get(schema);
  if (rules === undefined) {
    const described = (schema.describe().rules ?? []) as Array<{ name: string; args?: { method?: CustomMethod } }>;
    rules = described.flatMap(({ name, args }) => {
      const method = name === 'custom' ? args?.method : undefined;
      const start = method === undefined ? undefined : itemwiseStarts.get(method);
      return method === undefined || start === undefined ? [] : [[method, start] as const];
    });
    itemwiseCache.set(schema, rules);
  }
  return rules;
}

/** Checks a small value in one joi pass: adds its problems and returns its validated value. */
function checkWhole(schema: Joi.Schema, value: unknown, path: Path, report: ProblemReport): unknown {
  const result = schema.validate(value, report.everyProblem);
  report.addAll(result.error, path);
  return result.value;
}

const itemsSchemas = new WeakMap<Joi.Schema, Joi.Schema>();

/**
 * Checks a run of small items of an array (`items`, from position `offset`) in one joi pass
 * with the item schema: adds their problems, named by their place in the whole array, and
 * returns their validated values.
 */
function checkItems(item: Joi.Schema, items: unknown[], offset: number, path: Path, report: ProblemReport): unknown[] {
  let schema = itemsSchemas.get(item);
  if (schema === undefined) {
    schema = Joi.array().items(item);
    itemsSchemas.set(item, schema);
  }
  const result = schema.validate(items, report.everyProblem);
  report.addAllItems(result.error, path, offset);
  return result.value as unknown[];
}

/** Where the run of items from `start` ends that together have at most `budget` nodes. */
function smallItemsEnd(items: readonly unknown[], start: number, budget: number): number {
  let end = start;
  let left = budget;
  while (end < items.length) {
    const nodes = countNodes(items[end], left);
    if (nodes > left) break;
    left -= nodes;
    end += 1;
  }
  return end;
}

/** Adds the problems of `value` at `path` to the report, taking large values apart; returns its validated value. */
async function collect(schema: Joi.Schema, value: unknown, path: Path, report: ProblemReport, turns: Turns): Promise<unknown> {
  if (hasAtMostNodes(value, report.bounds.wholePassNodes)) return checkWhole(schema, value, path, report);
  if (schema.type === 'array' && Array.isArray(value)) return collectArray(schema, value, path, report, turns);
  if (schema.type === 'object' && isPlainObject(value) && isClosed(schema)) return collectObject(schema, value, path, report, turns);
  // A large value of the wrong kind is one problem, however large.
  report.addAll(schema.validate(value, report.firstProblem).error, path);
  return value;
}

async function collectArray(schema: Joi.Schema, value: unknown[], path: Path, report: ProblemReport, turns: Turns): Promise<unknown> {
  const limit: unknown = schema.$_getRule('max')?.args?.['limit'];
  if (typeof limit === 'number' && value.length > limit) {
    // Its items are not looked at: the array is refused whatever they are.
    report.add({ path: fieldPath(path), message: `${fieldPath(path) || 'value'} must contain less than or equal to ${limit} items` });
    return value;
  }
  const items = schema.$_terms['items'] as Joi.Schema[];
  const item = items.length === 1 && (schema.$_terms['ordered'] as unknown[]).length === 0 ? items[0] : undefined;
  if (item === undefined) {
    report.addAll(schema.validate(value, report.firstProblem).error, path);
    return value;
  }
  const checked: unknown[] = [];
  const runs = itemwiseRules(schema).map(([rule, start]) => ({ rule, check: start(), found: undefined as FoundProblem | undefined }));
  const budget = report.bounds.wholePassNodes;
  let index = 0;
  while (index < value.length) {
    const end = smallItemsEnd(value, index, budget);
    if (end === index) {
      // An item too large for one pass is taken apart on its own.
      checked.push(await collect(item, value[index], [...path, index], report, turns));
    } else {
      // Small items share a pass: joi's cost of entering a pass (merging options, starting its
      // state) is then paid once per run of items rather than once per item.
      for (const valid of checkItems(item, value.slice(index, end), index, path, report)) checked.push(valid);
    }
    for (let position = index; position < checked.length; position++) {
      for (const run of runs) {
        if (run.found !== undefined) continue;
        const problem = run.check(checked[position], position);
        if (problem !== undefined) run.found = { ...problem, index: position };
      }
    }
    index = checked.length;
    if (turns.due()) await turns.next();
  }
  foundInSlices.set(checked, new Map(runs.map((run) => [run.rule, run.found])));
  // The array's own rules (length, uniqueness, custom ones), without checking its items again.
  return checkWhole(arrayRules(schema), checked, path, report);
}

async function collectObject(schema: Joi.Schema, value: Record<string, unknown>, path: Path, report: ProblemReport, turns: Turns): Promise<unknown> {
  const members = memberSchemas(schema);
  // The object is checked whole with its small members; each large one stands in as null (present,
  // for rules between members) and is checked on its own.
  const shallow: Record<string, unknown> = {};
  const set = (key: string, member: unknown) => Object.defineProperty(shallow, key, { value: member, enumerable: true, writable: true, configurable: true });
  const large: string[] = [];
  let unknown = 0;
  for (const key of Object.keys(value)) {
    const member = value[key];
    if (!members.has(key)) {
      unknown += 1;
      // Each unknown key is one problem, listed by joi while the report has room, else only counted.
      if (unknown > report.bounds.maxReported) report.addUnlisted(1);
      else set(key, null);
    } else if (hasAtMostNodes(member, report.bounds.wholePassNodes)) {
      set(key, member);
    } else {
      large.push(key);
      set(key, null);
    }
    if (turns.due()) await turns.next();
  }
  const result = schema.validate(shallow, report.everyProblem);
  report.addAll(result.error, path, (problemPath) => large.includes(String(problemPath[0])));
  const checked: unknown = result.value;
  const target = isPlainObject(checked) ? checked : shallow;
  for (const key of large) {
    Object.defineProperty(target, key, {
      value: await collect(members.get(key) as Joi.Schema, value[key], [...path, key], report, turns),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return target;
}

const arrayRulesCache = new WeakMap<Joi.Schema, Joi.Schema>();

/** An array schema's own rules without its item schemas (joi's describe and build, items left out). */
function arrayRules(schema: Joi.Schema): Joi.Schema {
  const cached = arrayRulesCache.get(schema);
  if (cached !== undefined) return cached;
  const description = schema.describe() as Joi.Description & { items?: unknown };
  delete description.items;
  const rules = Joi.build(description) as Joi.Schema;
  arrayRulesCache.set(schema, rules);
  return rules;
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

/** Whether `value` has at most `budget` nodes (objects, arrays and scalars). */
function hasAtMostNodes(value: unknown, budget: number): boolean {
  return countNodes(value, budget) <= budget;
}

/**
 * How many nodes `value` has, or a number above `budget` if it has more: it stops counting past it,
 * so it recurses at most `budget` deep. It allocates nothing: every request's input is counted.
 */
export function countNodes(value: unknown, budget: number): number {
  if (typeof value !== 'object' || value === null) return 1;
  let count = 1;
  // Its children are then counted against what is left, never less than nothing.
  if (count > budget) return count;
  if (Array.isArray(value)) {
    if (value.length >= budget) return budget + 1;
    for (const item of value) {
      count += countNodes(item, budget - count);
      if (count > budget) return count;
    }
    return count;
  }
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    count += countNodes((value as Record<string, unknown>)[key], budget - count);
    if (count > budget) return count;
  }
  return count;
}

/**
 * The message of a problem found in a value checked apart from its ancestors, as joi would have
 * worded it in place: joi names a field by its path unless the schema has a label of its own.
 */
function relabel(detail: Joi.ValidationErrorItem, prefix: Path): string {
  if (prefix.length === 0) return detail.message;
  return renamed(detail, fieldPath(detail.path) || 'value', [...prefix, ...detail.path]);
}

/** A problem's message with the field joi named `local` (its default label) named by `path` instead. */
function renamed(detail: Joi.ValidationErrorItem, local: string, path: Path): string {
  if (detail.context?.label !== local || !detail.message.startsWith(local)) return detail.message;
  return `${fieldPath(path)}${detail.message.slice(local.length)}`;
}

/** ['data', 1, 'columnValue'] -> 'data[1].columnValue' */
export function fieldPath(path: ReadonlyArray<string | number>): string {
  return path.reduce<string>((text, part) => {
    if (typeof part === 'number') return `${text}[${part}]`;
    return text === '' ? part : `${text}.${part}`;
  }, '');
}
