import { expect } from 'chai';
import type Joi from 'joi';
import { SERVICE_LIMITS } from '../../src/service/limits.ts';
import { deleteTableBody, insertDataBody, readCellDataQuery } from '../../src/http/v1/schemas.ts';
import { batchDeleteBody, batchGetBody, createTableBody } from '../../src/http/v2/schemas.ts';

/** Every message of a failed validation, as joi renders it. */
function messages(schema: Joi.Schema, value: unknown): string[] {
  return (schema.validate(value, { abortEarly: false, convert: false }).error?.details ?? []).map((detail) => detail.message);
}

// The schemas' own wording replaces joi's for these codes; each is checked here, so that one
// falling back to joi's default text fails.
describe('schema messages', () => {
  it('name a table or family that breaks its pattern in the schema words', () => {
    expect(messages(readCellDataQuery, { tableName: '-x', id: 'k' })).to.deep.equal([
      '"tableName" may hold letters, digits, _ - and dots, and must start with a letter, digit or _',
    ]);
    expect(messages(createTableBody, { name: 't', families: [{ name: 'c f' }] })).to.deep.equal(['"families[0].name" may hold only letters, digits, _ - and dots']);
  });

  it('give a row key past its bound in bytes of UTF-8', () => {
    expect(messages(readCellDataQuery, { tableName: 't', id: 'é'.repeat(2049) })).to.deep.equal(['"id" must be at most 4096 bytes in UTF-8']);
  });

  it('say which earlier entry an entry repeats', () => {
    const cell = { columnFamily: 'cf', columnName: 'c', columnValue: 'v' };
    expect(messages(insertDataBody, { tableName: 't', rowKeyId: 'k', data: [cell, cell] })).to.deep.equal(['"data[1]" writes the same column as data[0]']);
    expect(messages(deleteTableBody, { tableList: ['a', 'b', 'a'] })).to.deep.equal(['"tableList[2]" names the same table as tableList[0]']);
    expect(messages(createTableBody, { name: 't', families: [{ name: 'f' }, { name: 'f' }] })).to.deep.equal([
      '"families[1]" names the same family as families[0]',
    ]);
    expect(messages(batchDeleteBody, { tables: ['a', 'a'] })).to.deep.equal(['"tables[1]" names the same table as tables[0]']);
  });

  it('name the limit a list of column selectors passes', () => {
    const columns = Array.from({ length: SERVICE_LIMITS.columnsPerRead + 1 }, (_, i) => `cf:c${i}`);
    expect(messages(batchGetBody, { keys: ['k'], columns })).to.deep.equal([
      `"columns" has more than ${SERVICE_LIMITS.columnsPerRead} selectors (limit columnsPerRead)`,
    ]);
  });
});
