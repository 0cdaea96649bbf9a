import type { Condition, ModifyRule, StoreLimits } from '../store/store.ts';
import { tooMany, tooManyBytes } from './limits.ts';
import { type MutationFields, type MutationInput, checkKey, checkRowMutations } from './mutations.ts';

/** A conditional mutation as a request asks for it: its sets may leave their timestamp to the service. */
export interface ConditionalInput {
  readonly conditions: readonly Condition[];
  readonly mutations: readonly MutationInput[];
  readonly otherwise: readonly MutationInput[];
}

/** The names of a conditional mutation's fields, for errors: `conditions`, `mutations[1].set.value`, `entries[2].otherwise`. */
export interface ConditionalFields {
  readonly key: string;
  readonly conditions: string;
  readonly mutations: MutationFields;
  readonly otherwise: MutationFields;
}

/**
 * checkConditional refuses, with a 400 naming the limit and the field, a conditional mutation
 * beyond the store's limits. It returns the bytes the larger branch writes.
 */
export function checkConditional(limits: StoreLimits, key: Buffer, input: ConditionalInput, fields: ConditionalFields): number {
  checkKey(limits, key, fields.key);
  const { conditions } = input;
  if (conditions.length > limits.conditionsPerCheck) {
    throw tooMany('conditionsPerCheck', fields.conditions, conditions.length, limits.conditionsPerCheck, 'conditions');
  }
  for (const [index, condition] of conditions.entries()) {
    if (condition.type === 'columnExists' || condition.type === 'columnEquals') {
      if (condition.column.length > limits.columnBytes) {
        throw tooManyBytes('columnBytes', `${fields.conditions}[${index}].column`, condition.column.length, limits.columnBytes);
      }
    }
    if (condition.type === 'columnEquals' && condition.value.length > limits.valueBytes) {
      throw tooManyBytes('valueBytes', `${fields.conditions}[${index}].equals`, condition.value.length, limits.valueBytes);
    }
  }
  const written = (mutations: readonly MutationInput[], branch: MutationFields) => (mutations.length === 0 ? 0 : checkRowMutations(limits, key, mutations, branch));
  return Math.max(written(input.mutations, fields.mutations), written(input.otherwise, fields.otherwise));
}

/** checkRules refuses, with a 400 naming the limit and the field, a readModifyWrite beyond the store's limits. */
export function checkRules(limits: StoreLimits, key: Buffer, rules: readonly ModifyRule[], keyField: string, rulesField: string): void {
  checkKey(limits, key, keyField);
  if (rules.length > limits.rulesPerRow) throw tooMany('rulesPerRow', rulesField, rules.length, limits.rulesPerRow, 'rules');
  let bytes = key.length;
  for (const [index, rule] of rules.entries()) {
    if (rule.column.length > limits.columnBytes) throw tooManyBytes('columnBytes', `${rulesField}[${index}].column`, rule.column.length, limits.columnBytes);
    bytes += rule.column.length;
    if (rule.type === 'append') {
      if (rule.value.length > limits.valueBytes) throw tooManyBytes('valueBytes', `${rulesField}[${index}].append`, rule.value.length, limits.valueBytes);
      bytes += rule.value.length;
    }
  }
  if (bytes > limits.bytesPerRow) throw tooManyBytes('bytesPerRow', rulesField, bytes, limits.bytesPerRow);
}
