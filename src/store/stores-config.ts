/**
 * Which stores the process serves: read from STORES_FILE (YAML or JSON), or, without it, from the
 * v1 variables (DATA_STORE, INSTANCE_IDS and the driver's own), which define one store named
 * after its driver. Each driver validates its own settings and instance IDs; this module only
 * knows the shape of the file and how to name a problem.
 */
import { readFileSync } from 'node:fs';
import Joi from 'joi';
import { parseDocument } from 'yaml';
import type { StoreDefinition, StoreDriver } from './driver.ts';
import { DRIVERS, defaultDriverName, findDriver } from './drivers.ts';

/** One configured store: its name, driver, instances and validated driver settings. */
export interface StoreConfig extends StoreDefinition {
  readonly driver: string;
}

/** Every configured store, in configuration order, and the default one (which serves v1). */
export interface StoresConfig {
  readonly default: StoreConfig;
  readonly all: readonly StoreConfig[];
}

/** The stores, or every problem found, each a sentence that names the variable or the file's field. */
export type StoresResult = { readonly stores: StoresConfig; readonly problems?: undefined } | { readonly stores?: undefined; readonly problems: readonly string[] };

/** Store names go into v2 paths, grants, metric labels and chart objects: keep them plain. */
export const STORE_NAME = /^[a-z0-9-]{1,32}$/;
const STORE_NAME_RULE = '1-32 characters: lowercase letters, digits and hyphens';

/** The v1 variables naming the store's driver and instances; each driver reads its own besides. */
const DATA_STORE = 'DATA_STORE';
const INSTANCE_IDS = 'INSTANCE_IDS';

const OPTIONS: Joi.ValidationOptions = { abortEarly: false, convert: true, errors: { wrap: { label: false } } };

/**
 * environmentVariables maps each setting of `driver` to the variable its fromEnvironment reads
 * it from, found by handing it an environment whose every value is its own name.
 */
function environmentVariables(driver: StoreDriver): Readonly<Record<string, string>> {
  if (driver.fromEnvironment === undefined) return {};
  const names = new Proxy({}, { get: (_target, name) => (typeof name === 'string' ? name : undefined) });
  const fields = driver.fromEnvironment(names);
  return Object.fromEntries(Object.entries(fields).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
}

/** Every variable that defines the store without STORES_FILE, with the field of a STORES_FILE entry that replaces it. */
export const STORE_VARIABLES: ReadonlyMap<string, string> = new Map([
  [DATA_STORE, 'driver'],
  [INSTANCE_IDS, 'instances'],
  ...DRIVERS.flatMap((driver) => Object.entries(environmentVariables(driver)).map(([field, variable]) => [variable, field] as const)),
]);

/**
 * loadStores reads the stores from STORES_FILE when it is set, otherwise from the v1 variables.
 * `env` holds the variables that are set and not blank.
 */
export function loadStores(env: Readonly<Record<string, string>>): StoresResult {
  const file = env['STORES_FILE']?.trim();
  if (file === undefined) return storesFromEnvironment(env);
  // Set beside the file, a variable would be ignored, or worse (the Bigtable client itself
  // obeys BIGTABLE_EMULATOR_HOST): refuse it, and say what to write instead.
  const ignored = [...STORE_VARIABLES].filter(([variable]) => env[variable] !== undefined);
  const conflicts = ignored.map(([variable, field]) => `${variable} cannot be set with STORES_FILE: set ${field} in the store's entry instead`);
  const stores = storesFromFile(file);
  return conflicts.length === 0 ? stores : { problems: [...conflicts, ...(stores.problems ?? [])] };
}

/** The one store the v1 variables define, named after its driver, which is therefore the default. */
export function storesFromEnvironment(env: Readonly<Record<string, string>>): StoresResult {
  const withEnvironment = DRIVERS.filter((driver) => driver.fromEnvironment !== undefined);
  const driverName = env[DATA_STORE]?.trim() ?? defaultDriverName(env);
  const driver = withEnvironment.find((candidate) => candidate.name === driverName);
  if (driver?.fromEnvironment === undefined) {
    return { problems: [`${DATA_STORE} must be one of [${withEnvironment.map((candidate) => candidate.name).join(', ')}]`] };
  }
  const problems: string[] = [];
  const instances = instanceList(env[INSTANCE_IDS], driver, problems);
  const variables = environmentVariables(driver);
  const settings = validateSettings(driver, definedOnly(driver.fromEnvironment(env)), (field) => variables[field] ?? field, problems);
  if (problems.length > 0) return { problems };
  const store = deepFreeze({ name: driver.name, driver: driver.name, instances, settings });
  return { stores: deepFreeze({ default: store, all: [store] }) };
}

/** INSTANCE_IDS: a comma-separated list, or the driver's default instances when unset. */
function instanceList(value: string | undefined, driver: StoreDriver, problems: string[]): string[] {
  if (value === undefined) {
    if (driver.defaultInstances === undefined) problems.push(`${INSTANCE_IDS} is required`);
    return [...(driver.defaultInstances ?? [])];
  }
  const ids = value.split(',').map((id) => id.trim());
  const invalid = ids.find((id) => !driver.instanceId.pattern.test(id));
  if (invalid !== undefined) {
    problems.push(`${INSTANCE_IDS} entry "${invalid}" is not a valid instance ID (${driver.instanceId.rule})`);
  } else if (new Set(ids).size !== ids.length) {
    problems.push(`${INSTANCE_IDS} lists an instance ID more than once`);
  }
  return ids;
}

const fileSchema = Joi.object({
  default: Joi.string(),
  stores: Joi.object().min(1).required().messages({ 'object.min': '{{#label}} must name at least one store' }),
});

const entrySchema = Joi.object({
  driver: Joi.string()
    .valid(...DRIVERS.map((driver) => driver.name))
    .required(),
  instances: Joi.array().items(Joi.string()).min(1).unique().required().messages({ 'array.unique': '{{#label}} repeats an earlier instance' }),
})
  .unknown(true)
  .messages({ 'object.base': '{{#label}} must be a map of the store\'s driver, instances and settings' });

/**
 * storesFromFile reads a STORES_FILE:
 * `{default: <name>, stores: {<name>: {driver, instances: [...], ...driver settings}}}`.
 * `default` may be left out when there is one store.
 */
export function storesFromFile(path: string): StoresResult {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    return { problems: [`STORES_FILE "${path}" cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`] };
  }
  // YAML 1.2 reads JSON too. Repeated keys (two stores of one name) are errors, not overrides.
  const document = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
  if (document.errors.length > 0) {
    return { problems: document.errors.map((error) => `STORES_FILE "${path}" is not valid YAML or JSON: ${firstLine(error.message)}`) };
  }
  const problems: string[] = [];
  const problem = (message: string) => problems.push(`STORES_FILE: ${message}`);
  const content: unknown = document.toJS();
  if (typeof content !== 'object' || content === null || Array.isArray(content)) return { problems: ['STORES_FILE: the file must be a map of stores (and default)'] };
  const file = fileSchema.validate(content, OPTIONS);
  if (file.error) {
    for (const detail of file.error.details) problem(detail.message);
    return { problems };
  }
  const { default: defaultName, stores: entries } = file.value as { default?: string; stores: Record<string, unknown> };

  const all: StoreConfig[] = [];
  for (const [name, entry] of Object.entries(entries)) {
    if (!STORE_NAME.test(name)) {
      problem(`stores.${name} is not a valid store name (${STORE_NAME_RULE})`);
      continue;
    }
    const store = storeEntry(name, entry, problem);
    if (store !== undefined) all.push(store);
  }
  exclusiveResourceConflicts(all, problem);

  const names = Object.keys(entries);
  if (defaultName === undefined && names.length > 1) {
    problem(`default is required when there is more than one store: name one of ${names.join(', ')}`);
  } else if (defaultName !== undefined && !names.includes(defaultName)) {
    problem(`default "${defaultName}" is not a store of the file: name one of ${names.join(', ')}`);
  }
  if (problems.length > 0) return { problems };
  const defaultStore = all.find((store) => store.name === (defaultName ?? names[0])) as StoreConfig;
  return { stores: deepFreeze({ default: defaultStore, all }) };
}

/** One entry of `stores`, or undefined after reporting its problems. */
function storeEntry(name: string, entry: unknown, problem: (message: string) => void): StoreConfig | undefined {
  const label = `stores.${name}`;
  const found: string[] = [];
  const result = entrySchema.validate(entry, OPTIONS);
  for (const detail of result.error?.details ?? []) {
    // The entry itself is labelled "value"; every other message starts with its field.
    found.push(detail.path.length === 0 ? detail.message.replace(/^value/, label) : `${label}.${detail.message}`);
  }
  const { driver: driverName, instances, ...rest } = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
  // Without a known driver there is nothing to check the rest against.
  const driver = typeof driverName === 'string' ? findDriver(driverName) : undefined;
  const ids = Array.isArray(instances) ? (instances as unknown[]) : [];
  if (driver !== undefined) {
    for (const [index, instance] of ids.entries()) {
      if (typeof instance === 'string' && !driver.instanceId.pattern.test(instance)) {
        found.push(`${label}.instances[${index}] "${instance}" is not a valid ${driver.name} instance ID (${driver.instanceId.rule})`);
      }
    }
  }
  // Without a driver its settings cannot be checked, but a field no store has is a typo all the same (`drver`).
  if (driver === undefined) {
    for (const field of Object.keys(rest).filter((name) => !ANY_STORE_FIELD.has(name))) found.push(`${label}.${unknownField(field, ANY_STORE_FIELD)}`);
  }
  const settings = driver === undefined ? {} : validateSettings(driver, rest, (field) => `${label}.${field}`, found);
  for (const message of found) problem(message);
  if (driver === undefined || found.length > 0) return undefined;
  return { name, driver: driver.name, instances: ids as string[], settings };
}

/**
 * Validates one store's settings with its driver's schema. Messages name the field as `label`
 * says: the environment variable, or the field's place in the file.
 */
function validateSettings(driver: StoreDriver, raw: Record<string, unknown>, label: (field: string) => string, problems: string[]): object {
  const result = driver.settings.validate(raw, OPTIONS);
  if (!result.error) return result.value;
  for (const detail of result.error.details) {
    const own = detail.context?.label ?? detail.path.join('.');
    const field = String(detail.path[0] ?? own);
    if (detail.type === 'object.unknown' && detail.path.length === 1) {
      const known = new Set([...ENTRY_FIELDS, ...fieldsOf(driver)]);
      problems.push(`${label(field)}${unknownField(field, known).slice(field.length)}`);
      continue;
    }
    // Every driver message starts with its label ({{#label}}); a nested field keeps its tail.
    const message = detail.message.startsWith(own) ? detail.message.slice(own.length) : ` ${detail.message}`;
    problems.push(`${label(field)}${own.slice(field.length)}${message}`);
  }
  return {};
}

/** The fields of a STORES_FILE entry besides its driver's settings. */
const ENTRY_FIELDS = ['driver', 'instances'];

function fieldsOf(driver: StoreDriver): string[] {
  return Object.keys((driver.settings.describe() as { keys?: Record<string, unknown> }).keys ?? {});
}

/** Every field an entry of some driver may have. */
const ANY_STORE_FIELD: ReadonlySet<string> = new Set([...ENTRY_FIELDS, ...DRIVERS.flatMap(fieldsOf)]);

/** "<field> is an unknown field", with the known field it is most likely a typo of. */
function unknownField(field: string, known: ReadonlySet<string>): string {
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const distance = editDistance(field.toLowerCase(), name.toLowerCase());
    if (distance <= 2 && distance < name.length / 2 && (best === undefined || distance < best.distance)) best = { name, distance };
  }
  return `${field} is an unknown field${best === undefined ? '' : ` (did you mean ${best.name}?)`}`;
}

/** Levenshtein distance, for field names of a few characters. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1)));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/** Two stores may not hold the same local resource (the embedded store's data directory). */
function exclusiveResourceConflicts(stores: readonly StoreConfig[], problem: (message: string) => void): void {
  const holders = new Map<string, string>();
  for (const store of stores) {
    const claims = findDriver(store.driver)?.exclusiveResources?.(store.settings) ?? {};
    for (const [field, resource] of Object.entries(claims)) {
      const holder = holders.get(resource);
      if (holder === undefined) {
        holders.set(resource, store.name);
      } else {
        problem(`stores.${store.name}.${field} "${resource}" is already used by store "${holder}": two stores cannot share it`);
      }
    }
  }
}

function definedOnly(values: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined));
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0] ?? text;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}
