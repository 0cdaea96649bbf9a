/**
 * A fast way through validation for the common request: a check compiled from a joi schema that
 * says "valid" only where joi, with the options validate.ts passes it, would accept the value and
 * give it back as it is. It never says "invalid": anything it is not sure of (a problem, a value
 * joi would convert, a feature it does not know) goes to joi, which then checks and words the
 * problems as ever. joi stays the one source of truth: the check walks the schema's own terms and
 * calls joi's own base and rule validators (string lengths, patterns, custom rules, array lengths
 * and uniqueness); what it does itself is only what joi's validator does around them (presence,
 * allowed values, members of objects, items of arrays, xor and oxor).
 *
 * Why: a joi pass costs far more than the checks it makes. It merges its options, builds a state,
 * a helper object and three closures for every value, and clones every object and array, a
 * large share of what a small request allocates (figures: docs/performance.md).
 *
 * The check relies on joi's internals (`_flags`, `_rules`, `$_terms`, `_definition`); a schema
 * using anything else gets no check. test/unit/precheck.test.ts holds it to joi's answers over
 * every operation's schemas.
 */
import type Joi from 'joi';

/** The options of the joi pass the check stands for: validate.ts passes convert: false and a context. */
export interface PrecheckPrefs {
  readonly context?: Record<string, unknown> | undefined;
}

/** Whether joi would accept `value` as it is, with these options; false: ask joi. */
export type Precheck = (value: unknown, prefs: PrecheckPrefs) => boolean;

const checks = new WeakMap<Joi.Schema, Precheck | null>();

/** The check of `schema`, compiled once; undefined when the schema uses what the check does not know. */
export function precheckOf(schema: Joi.Schema): Precheck | undefined {
  let check = checks.get(schema);
  if (check === undefined) {
    const node = compile(schema as unknown as Schema);
    check = node === undefined ? null : runner(node);
    checks.set(schema, check);
  }
  return check ?? undefined;
}

// joi's internals, as far as the check reads them.
interface Rule {
  readonly method: string;
  readonly args: Record<string, unknown> | null;
  readonly _resolve: readonly unknown[];
  readonly warn?: boolean;
}
interface Values {
  readonly _values: Set<unknown>;
  readonly _refs: Set<unknown>;
}
type BaseValidate = (value: unknown, helpers: Helpers) => { value?: unknown; errors?: unknown } | undefined;
type RuleValidate = (value: unknown, helpers: Helpers, args: Record<string, unknown> | null, rule: Rule) => unknown;
interface Schema {
  readonly type: string;
  readonly _flags: Record<string, unknown>;
  readonly _rules: readonly Rule[];
  readonly $_terms: Record<string, unknown>;
  readonly _valids: Values | null;
  readonly _invalids: Values | null;
  readonly _preferences: Record<string | symbol, unknown> | null;
  readonly _definition: { readonly validate?: BaseValidate; readonly rules: Record<string, { readonly validate?: RuleValidate } | undefined> };
}
interface Ref {
  readonly type: string;
  readonly ancestor: number;
  readonly path: readonly string[];
  readonly adjust: unknown;
  readonly map: unknown;
  readonly in: boolean;
}
interface Dependency {
  readonly rel: string;
  readonly key: unknown;
  readonly peers: readonly Ref[];
  readonly options: { readonly isPresent?: unknown };
}

/** What joi's validators are given (`helpers`): here, answers that are never the value itself. */
interface Helpers {
  schema: Schema;
  original: unknown;
  prefs: PrecheckPrefs;
  state: { path: unknown[]; ancestors: unknown[]; localize: () => unknown };
  error: () => unknown;
  message: () => unknown;
  warn: () => void;
  errorsArray: () => unknown[];
}

/** What a validator returns to report a problem here: nothing a value can be. */
const PROBLEM = Object.freeze({ problem: true });

/** Checks one value, its ancestors (nearest first) being those joi's state would hold. */
type Node = (value: unknown, ancestors: unknown[], helpers: Helpers) => boolean;

// Flags that change nothing the check decides (label, description) or that it handles (presence, only).
const KNOWN_FLAGS = new Set(['label', 'description', 'presence', 'only']);
// Terms that are documentation, or that the check handles (keys, dependencies, items).
const KNOWN_TERMS = new Set(['examples', 'metas', 'notes', 'tags', 'keys', 'dependencies', 'items', '_inclusions']);
const TYPES = new Set(['object', 'array', 'string', 'number', 'boolean']);

function compile(schema: Schema): Node | undefined {
  if (!TYPES.has(schema.type)) return undefined;
  if (Object.keys(schema._flags).some((flag) => !KNOWN_FLAGS.has(flag))) return undefined;
  for (const [term, value] of Object.entries(schema.$_terms)) {
    if (value !== null && !(Array.isArray(value) && value.length === 0) && !KNOWN_TERMS.has(term)) return undefined;
  }
  if (schema._invalids !== null) return undefined;
  const valids = schema._valids;
  if (valids !== null && (valids._refs.size > 0 || [...valids._values].some((value) => typeof value === 'object' && value !== null))) return undefined;
  // A schema's own options: `messages`, which words problems only, and `convert`, which turns
  // query text into numbers; such a value is left to joi when it is there.
  const prefs = schema._preferences;
  const converts = prefs !== null && 'convert' in prefs;
  if (prefs !== null && Object.keys(prefs).some((key) => key !== 'convert' && key !== 'messages')) return undefined;

  const rules: Rule[] = [];
  const validators: RuleValidate[] = [];
  for (const rule of schema._rules) {
    if (rule.method === 'items' && schema.type === 'array') continue;
    const validate = schema._definition.rules[rule.method]?.validate;
    if (validate === undefined || rule._resolve.length > 0 || rule.warn === true) return undefined;
    rules.push(rule);
    validators.push(validate);
  }
  const typed = schema.type === 'object' ? objectNode(schema) : schema.type === 'array' ? arrayNode(schema) : baseNode(schema);
  if (typed === undefined) return undefined;

  const presence = schema._flags['presence'] ?? 'optional';
  const only = schema._flags['only'] === true;
  return (value, ancestors, helpers) => {
    if (value === undefined) return presence !== 'required';
    if (presence === 'forbidden' || converts) return false;
    if (valids !== null && valids._values.has(value)) return true;
    if (only) return false;
    if (!typed(value, ancestors, helpers)) return false;
    for (let index = 0; index < rules.length; index++) {
      const rule = rules[index] as Rule;
      // Checking members and items used the helpers: they are set again for each validator.
      helpers.schema = schema;
      helpers.original = value;
      helpers.state.ancestors = ancestors;
      if (!Object.is((validators[index] as RuleValidate)(value, helpers, rule.args, rule), value)) return false;
    }
    return true;
  };
}

/** Strings, numbers and booleans: joi's own check of the type, which must keep the value as it is. */
function baseNode(schema: Schema): Node | undefined {
  const validate = schema._definition.validate;
  if (validate === undefined) return undefined;
  return (value, ancestors, helpers) => {
    helpers.schema = schema;
    helpers.original = value;
    helpers.state.ancestors = ancestors;
    const result = validate(value, helpers);
    return result === undefined || (result.errors === undefined && Object.is(result.value, value));
  };
}

function objectNode(schema: Schema): Node | undefined {
  const keys = schema.$_terms['keys'] as ReadonlyArray<{ readonly key: string; readonly schema: Schema }> | null;
  if (keys === null) return undefined;
  const names = keys.map(({ key }) => key);
  const nodes: Node[] = [];
  for (const { schema: member } of keys) {
    const node = compile(member);
    if (node === undefined) return undefined;
    nodes.push(node);
  }
  const known = new Set(names);
  const dependencies: Array<(value: Record<string, unknown>) => boolean> = [];
  for (const dependency of (schema.$_terms['dependencies'] as readonly Dependency[] | null) ?? []) {
    const check = dependencyCheck(dependency);
    if (check === undefined) return undefined;
    dependencies.push(check);
  }
  return (value, ancestors, helpers) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
    const object = value as Record<string, unknown>;
    // Unknown members are refused (joi's allowUnknown is off and no schema here sets unknown).
    for (const key in object) if (Object.hasOwn(object, key) && !known.has(key)) return false;
    const inner = [object, ...ancestors];
    for (let index = 0; index < names.length; index++) if (!(nodes[index] as Node)(object[names[index] as string], inner, helpers)) return false;
    for (const check of dependencies) if (!check(object)) return false;
    return true;
  };
}

/** xor and oxor over members of the object itself, as joi's keys type checks them. */
function dependencyCheck(dependency: Dependency): ((value: Record<string, unknown>) => boolean) | undefined {
  if ((dependency.rel !== 'xor' && dependency.rel !== 'oxor') || dependency.key !== null || dependency.options.isPresent !== undefined) return undefined;
  const peers: string[] = [];
  for (const peer of dependency.peers) {
    if (peer.type !== 'value' || peer.ancestor !== 0 || peer.path.length !== 1 || peer.adjust != null || peer.map != null || peer.in) return undefined;
    peers.push(peer.path[0] as string);
  }
  const most = 1;
  const least = dependency.rel === 'xor' ? 1 : 0;
  return (value) => {
    let present = 0;
    for (const peer of peers) if (value[peer] !== undefined) present += 1;
    return present >= least && present <= most;
  };
}

function arrayNode(schema: Schema): Node | undefined {
  const terms = schema.$_terms;
  const items = terms['items'] as readonly Schema[];
  const inclusions = terms['_inclusions'] as readonly Schema[];
  // One item schema, neither required nor forbidden: each item must match it.
  if (items.length !== 1 || inclusions.length !== 1 || inclusions[0] !== items[0]) return undefined;
  const item = compile(items[0] as Schema);
  if (item === undefined) return undefined;
  return (value, ancestors, helpers) => {
    if (!Array.isArray(value)) return false;
    const inner = [value, ...ancestors];
    for (let index = 0; index < value.length; index++) {
      const entry: unknown = value[index];
      // Holes are refused (joi's sparse flag is not set).
      if (entry === undefined || !item(entry, inner, helpers)) return false;
    }
    return true;
  };
}

function problem(): unknown {
  return PROBLEM;
}

// A warning is not a pass with nothing to say: let joi decide.
function warn(): never {
  throw new Error('a joi warning');
}

function problems(): unknown[] {
  return [PROBLEM];
}

function localize(this: Helpers['state']): unknown {
  return this;
}

/**
 * One check's helpers, shared by all its validators: each node sets the schema, the value and the
 * ancestors right before it calls one, and validators run synchronously.
 */
function makeHelpers(prefs: PrecheckPrefs): Helpers {
  return {
    schema: undefined as unknown as Schema,
    original: undefined,
    prefs,
    state: { path: [], ancestors: [], localize },
    error: problem,
    message: problem,
    warn,
    errorsArray: problems,
  };
}

function runner(node: Node): Precheck {
  return (value, prefs) => {
    try {
      return node(value, [], makeHelpers(prefs));
    } catch {
      // A validator that expected more of joi's state than the check gives: let joi decide.
      return false;
    }
  };
}
