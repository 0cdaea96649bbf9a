import { expect } from 'chai';
import Joi from 'joi';
import { API_OPERATIONS } from '../../src/http/api.ts';
import { ROW_KEY_NAMES } from '../../src/http/validation/row-key-names.ts';
import { carriesRowKeys, rowKeyNames } from '../../src/http/validation/schemas.ts';

describe('row key names (what traces redact)', () => {
  it('are every member marked in the operations’ path, query and body schemas, and only those', () => {
    const used = API_OPERATIONS.flatMap((operation) => [operation.params, operation.query, operation.body].flatMap((schema) => (schema === undefined ? [] : rowKeyNames(schema))));
    // A schema defined outside v1/schemas.ts and v2/schemas.ts would be missed by tracing: this would then differ.
    expect(ROW_KEY_NAMES).to.deep.equal([...new Set(used)].sort());
    expect(ROW_KEY_NAMES).to.deep.equal(['end', 'id', 'key', 'keys', 'pageToken', 'prefix', 'rowKeyId', 'start']);
  });

  it('are found in nested objects and array items, and not in members left unmarked', () => {
    const schema = Joi.object({
      plain: Joi.string(),
      top: carriesRowKeys(Joi.string()),
      nested: Joi.object({ inner: carriesRowKeys(Joi.string()), other: Joi.number() }),
      list: Joi.array().items(Joi.object({ item: carriesRowKeys(Joi.string()) })),
    });
    expect(rowKeyNames(schema).sort()).to.deep.equal(['inner', 'item', 'top']);
  });

  it('leave a marked schema as it was for validation', () => {
    const marked = carriesRowKeys(Joi.string().min(2));
    expect(marked.validate('a').error?.message).to.equal('"value" length must be at least 2 characters long');
    expect(marked.validate('ab').error).to.equal(undefined);
  });
});
