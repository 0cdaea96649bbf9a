import { ApiError } from '../../service/errors.ts';
import type { ConditionalFields, ConditionalInput, EntryInput, MutationFields, MutationInput } from '../../service/rows.ts';
import { forEachInSlices, mapInSlices } from '../../lib/slices.ts';
import { parseTimestamp } from '../../service/timestamps.ts';
import type { Condition, FamilySpec, ModifyRule } from '../../store/store.ts';
import { type TextEncoding, tallTextBytes } from '../json/tall-text.ts';
import { bodyBytes } from './bytes.ts';
import type { BatchWriteBody, CellBody, CheckAndMutateBody, ConditionBody, FamilyBody, MutationBody, RuleBody } from './schemas.ts';

/**
 * The v2 request bodies in domain terms (mutations of bytes), and the names of their fields for
 * the errors the service reports about them. Input has passed the schemas.
 */

/** A family of a create request, with only the bounds it sets. */
export function familySpec(family: FamilyBody): FamilySpec {
  return {
    name: family.name,
    ...(family.maxVersions === undefined ? {} : { maxVersions: family.maxVersions }),
    ...(family.maxAgeSeconds === undefined ? {} : { maxAgeSeconds: family.maxAgeSeconds }),
  };
}

/** How a cell of a write carries its column and value: base64 when the request or the cell says so, else text. */
function cellEncoding(cell: CellBody, base64: boolean): TextEncoding {
  return base64 || cell.encoding === 'base64' ? 'base64' : 'utf8';
}

/** The bytes of the tall values among `cells` (tall-text.ts), made a slice at a time, for setOf. */
export function tallValues(cells: readonly CellBody[], base64: boolean): Promise<ReadonlyMap<CellBody, Buffer>> {
  return tallTextBytes(cells, (cell) => cell.value, (cell) => cellEncoding(cell, base64));
}

/** The cells the set mutations among `mutations` write. */
export function setCells(mutations: readonly MutationBody[]): CellBody[] {
  return mutations.flatMap((mutation) => ('set' in mutation ? [mutation.set] : []));
}

/** A cell of a write as the set mutation it is; its value's bytes come from `tall` when they are there (tallValues). */
export function setOf(cell: CellBody, base64: boolean, tall?: ReadonlyMap<CellBody, Buffer>): MutationInput {
  const encoding = cellEncoding(cell, base64);
  return {
    type: 'set',
    family: cell.family,
    column: bodyBytes(cell.column, encoding === 'base64'),
    value: tall?.get(cell) ?? bodyBytes(cell.value, encoding === 'base64'),
    timestampMicros: cell.timestamp === undefined ? undefined : parseTimestamp(cell.timestamp),
  };
}

export function mutationOf(mutation: MutationBody, base64: boolean, tall?: ReadonlyMap<CellBody, Buffer>): MutationInput {
  if ('set' in mutation) return setOf(mutation.set, base64, tall);
  if ('deleteColumn' in mutation) {
    const { family, column, encoding } = mutation.deleteColumn;
    return { type: 'deleteColumn', family, column: bodyBytes(column, base64 || encoding === 'base64') };
  }
  if ('deleteFamily' in mutation) return { type: 'deleteFamily', family: mutation.deleteFamily.family };
  return { type: 'deleteRow' };
}

/** Field names of a write's cells: `cells[2].value`. */
export function cellFields(keyPath: string): MutationFields {
  return { key: keyPath, mutations: 'cells', field: (index, name) => `cells[${index}].${name}` };
}

/** Field names of a list of mutations at `path`: `mutations[2].set.value`, `entries[1].mutations[0].deleteColumn.column`. */
export function mutationFields(keyPath: string, path: string, mutations: readonly MutationBody[]): MutationFields {
  return {
    key: keyPath,
    mutations: path,
    field: (index, name) => `${path}[${index}].${Object.keys(mutations[index] ?? {})[0] ?? 'set'}.${name}`,
  };
}

/**
 * Refuses a write with two cells of the same family, column and timestamp (or both without one):
 * one would silently replace the other. A large write is checked in slices.
 */
export async function requireDistinctCells(cells: readonly MutationInput[]): Promise<void> {
  const seen = new Map<string, number>();
  await forEachInSlices(cells, (cell, index) => {
    if (cell.type !== 'set') return;
    const identity = `${cell.family}\u0000${cell.column.toString('base64')}\u0000${cell.timestampMicros ?? ''}`;
    const first = seen.get(identity);
    if (first !== undefined) {
      const message = `cells[${index}] writes the same column and timestamp as cells[${first}]`;
      throw new ApiError('VALIDATION_FAILED', `${message}.`, { errors: [{ path: `cells[${index}]`, message }] });
    }
    seen.set(identity, index);
  });
}

/** A write's cells as set mutations: tall values made into bytes and a large write mapped a slice at a time. */
export async function setsOf(cells: readonly CellBody[], base64: boolean): Promise<MutationInput[]> {
  const tall = await tallValues(cells, base64);
  return mapInSlices(cells, (cell) => setOf(cell, base64, tall));
}

/** A row's mutations in domain terms: tall values made into bytes and a long list mapped a slice at a time. */
export async function mutationsOf(mutations: readonly MutationBody[], base64: boolean): Promise<MutationInput[]> {
  const tall = await tallValues(setCells(mutations), base64);
  return mapInSlices(mutations, (mutation) => mutationOf(mutation, base64, tall));
}

/** A batchWrite's entries in domain terms, with the names of their fields; tall values made into bytes first. */
export async function batchEntries(entries: BatchWriteBody['entries'], base64: boolean): Promise<EntryInput[]> {
  const tall = await tallValues(setCells(entries.flatMap((entry) => [...(entry.mutations ?? []), ...(entry.otherwise ?? [])])), base64);
  return entries.map((entry, index) => {
    const fields = conditionalFields(`entries[${index}].key`, `entries[${index}].`, entry);
    return {
      key: bodyBytes(entry.key, base64 || entry.encoding === 'base64'),
      mutations: (entry.mutations ?? []).map((mutation) => mutationOf(mutation, base64, tall)),
      fields: fields.mutations,
      check:
        entry.conditions === undefined
          ? undefined
          : {
              conditions: entry.conditions.map((condition) => conditionOf(condition, base64)),
              otherwise: (entry.otherwise ?? []).map((mutation) => mutationOf(mutation, base64, tall)),
              fields,
            },
    };
  });
}

/** A checkAndMutate's conditions and both lists in domain terms; the tall values of either list made into bytes first. */
export async function conditionalOf(body: CheckAndMutateBody, base64: boolean): Promise<ConditionalInput> {
  const mutations = body.mutations ?? [];
  const otherwise = body.otherwise ?? [];
  const tall = await tallValues(setCells([...mutations, ...otherwise]), base64);
  return {
    conditions: body.conditions.map((condition) => conditionOf(condition, base64)),
    mutations: mutations.map((mutation) => mutationOf(mutation, base64, tall)),
    otherwise: otherwise.map((mutation) => mutationOf(mutation, base64, tall)),
  };
}

/** A condition of a request in the store's terms. */
export function conditionOf(body: ConditionBody, base64: boolean): Condition {
  if ('rowExists' in body) return { type: 'rowExists', exists: body.rowExists };
  if (!('column' in body)) return { type: 'familyExists', family: body.family, exists: body.exists };
  const encoded = base64 || body.encoding === 'base64';
  const column = bodyBytes(body.column, encoded);
  if ('equals' in body) return { type: 'columnEquals', family: body.family, column, value: bodyBytes(body.equals, encoded) };
  return { type: 'columnExists', family: body.family, column, exists: body.exists };
}

/** A rule of a request in the store's terms; `increment` is an integer the schema checked to be within int64. */
export function ruleOf(body: RuleBody, base64: boolean): ModifyRule {
  const encoded = base64 || body.encoding === 'base64';
  const column = bodyBytes(body.column, encoded);
  if ('append' in body) return { type: 'append', family: body.family, column, value: bodyBytes(body.append, encoded) };
  return { type: 'increment', family: body.family, column, amount: BigInt(body.increment) };
}

/** Field names of a conditional mutation whose lists are at `prefix` (`` or `entries[2].`). */
export function conditionalFields(keyPath: string, prefix: string, body: { mutations?: readonly MutationBody[]; otherwise?: readonly MutationBody[] }): ConditionalFields {
  return {
    key: keyPath,
    conditions: `${prefix}conditions`,
    mutations: mutationFields(keyPath, `${prefix}mutations`, body.mutations ?? []),
    otherwise: mutationFields(keyPath, `${prefix}otherwise`, body.otherwise ?? []),
  };
}
