import { expect } from 'chai';
import fc from 'fast-check';
import Joi from 'joi';
import { insertDataBody, deleteTableBody } from '../../src/http/v1/schemas.ts';
import { MAX_REPORTED_ERRORS, VALIDATION_BOUNDS, type ValidationBounds, countNodes, itemwise, validate } from '../../src/http/validation/validate.ts';
import { ApiError, type FieldError } from '../../src/service/errors.ts';
import { TurnCounter } from '../support/turns.ts';

interface Refusal {
  readonly detail: string;
  readonly errors: FieldError[];
  readonly errorCount?: number;
}

async function refusal(schema: Joi.Schema, input: unknown, bounds: ValidationBounds = VALIDATION_BOUNDS): Promise<Refusal> {
  try {
    await validate(schema, input, bounds);
  } catch (error) {
    expect(error).to.be.instanceOf(ApiError);
    expect((error as ApiError).code).to.equal('VALIDATION_FAILED');
    const { errors, errorCount } = (error as ApiError).extensions as { errors: FieldError[]; errorCount?: number };
    return { detail: (error as ApiError).detail, errors, ...(errorCount === undefined ? {} : { errorCount }) };
  }
  throw new Error('validate accepted the input');
}

/** Every problem joi finds in one pass, as the service reported them before reports were bounded. */
function everyProblem(schema: Joi.Schema, input: unknown): FieldError[] {
  const details = schema.validate(input, { abortEarly: false, convert: false, errors: { wrap: { label: false } } }).error?.details ?? [];
  return details.map((detail) => ({
    path: detail.path.reduce<string>((text, part) => (typeof part === 'number' ? `${text}[${part}]` : text === '' ? part : `${text}.${part}`), ''),
    message: detail.message,
  }));
}

const cell = (columnFamily: unknown, columnName: unknown = 'c', columnValue: unknown = 'v') => ({ columnFamily, columnName, columnValue });

describe('validate', () => {
  it('returns valid input as it is', async () => {
    const body = { tableName: 't', rowKeyId: 'r', data: [cell('cf')] };
    expect(await validate(insertDataBody, body)).to.deep.equal(body);
  });

  it('lists every problem of a small input, as joi words them', async () => {
    const body = { tableName: '-', rowKeyId: 'r', data: [cell('cf', 'c', 5), cell('!')], extra: 1 };
    const result = await refusal(insertDataBody, body);
    expect(result.errors).to.deep.equal(everyProblem(insertDataBody, body));
    expect(result.errors).to.have.length(4);
    expect(result).to.not.have.property('errorCount');
    expect(result.detail).to.match(/ \(and 3 more problems\)\.$/);
  });

  it(`lists the first ${MAX_REPORTED_ERRORS} problems of 100,000 invalid cells and counts them all, without overflowing the stack`, async function () {
    this.timeout(60_000);
    // Three problems per cell, 300,000 in all: past what joi can report in one pass.
    const body = { tableName: 't', rowKeyId: 'r', data: Array.from({ length: 100_000 }, () => cell('!', 5, 6)) };
    const result = await refusal(insertDataBody, body);
    expect(result.errors).to.have.length(MAX_REPORTED_ERRORS);
    // And one more: the cells all write the same column (joi's one pass finds it too).
    expect(result.errorCount).to.equal(300_001);
    expect(result.errors[0]).to.deep.equal({ path: 'data[0].columnFamily', message: 'data[0].columnFamily may hold only letters, digits, _ - and dots' });
    expect(result.errors[3]).to.deep.equal({ path: 'data[1].columnFamily', message: 'data[1].columnFamily may hold only letters, digits, _ - and dots' });
    expect(JSON.stringify(result).length).to.be.below(4096);
  });

  it('refuses an array over its maximum length without looking at its items', async () => {
    const body = { tableList: Array.from({ length: 5000 }, () => ({ not: 'a name' })) };
    expect((await refusal(deleteTableBody, body)).errors).to.deep.equal([{ path: 'tableList', message: 'tableList must contain less than or equal to 100 items' }]);
  });

  it('counts thousands of unknown keys but lists only the first ones', async () => {
    const body: Record<string, unknown> = { tableList: ['t'] };
    for (let i = 0; i < 50_000; i++) body[`k${i}`] = i;
    const result = await refusal(deleteTableBody, body);
    expect(result.errors).to.have.length(MAX_REPORTED_ERRORS);
    expect(result.errors[0]).to.deep.equal({ path: 'k0', message: 'k0 is not allowed' });
    expect(result.errorCount).to.equal(50_000);
  });

  it('quotes at most 100 characters of a field name back', async () => {
    const result = await refusal(deleteTableBody, { tableList: ['t'], ['x'.repeat(100_000)]: 1 });
    expect(JSON.stringify(result).length).to.be.below(600);
  });

  it('takes a large value of the wrong type as one problem', async () => {
    const result = await refusal(insertDataBody, { tableName: Array(100_000).fill([1]), rowKeyId: 'r', data: [cell('cf')] });
    expect(result.errors).to.deep.equal([{ path: 'tableName', message: 'tableName must be a string' }]);
  });

  it('reports the same problems taken apart as joi does in one pass, in any order, and the same valid value (fast-check)', async () => {
    // Tiny bounds make every input "large", so every path of the bounded walk is taken: with 3
    // nodes a cell is taken apart member by member, with 5 to 14 a few cells share a pass.
    const bounds = fc.integer({ min: 3, max: 14 }).map((wholePassNodes): ValidationBounds => ({ maxReported: 1000, wholePassNodes }));
    const anyCell = fc.record(
      {
        columnFamily: fc.oneof(fc.constantFrom('cf', 'f-2', '', '!'), fc.integer()),
        columnName: fc.oneof(fc.string({ maxLength: 4 }), fc.constant(5), fc.constant('AA=='), fc.constant('@@')),
        columnValue: fc.oneof(fc.string({ maxLength: 4 }), fc.constant(null), fc.constant('\ud800')),
        encoding: fc.constantFrom('base64', 'hex'),
        extra: fc.integer(),
      },
      { requiredKeys: [] },
    );
    const body = fc.record(
      {
        tableName: fc.oneof(fc.constantFrom('t', '-x', ''), fc.integer()),
        rowKeyId: fc.oneof(fc.constant('r'), fc.constant(''), fc.constant(7)),
        data: fc.oneof(fc.array(fc.oneof(anyCell, fc.integer()), { maxLength: 6 }), fc.constant('cells')),
        other: fc.string(),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(body, bounds, async (input, tiny) => {
        const joi = everyProblem(insertDataBody, input);
        if (joi.length === 0) return;
        const ours = (await refusal(insertDataBody, input, tiny)).errors;
        const key = (problem: FieldError) => `${problem.path}\u0000${problem.message}`;
        expect(ours.map(key).sort(), JSON.stringify(input)).to.deep.equal(joi.map(key).sort());
      }),
      { numRuns: 500 },
    );
  });

  it('returns valid input taken apart as joi does in one pass (fast-check)', async () => {
    const bounds = fc.integer({ min: 3, max: 14 }).map((wholePassNodes): ValidationBounds => ({ maxReported: 20, wholePassNodes }));
    const validCell = fc.record({ columnFamily: fc.constantFrom('cf', 'f-2'), columnName: fc.string({ maxLength: 6 }), columnValue: fc.string({ maxLength: 6 }) });
    const body = fc.record({
      tableName: fc.constantFrom('t', 'orders'),
      rowKeyId: fc.string({ minLength: 1, maxLength: 6 }).filter((key) => key.isWellFormed()),
      data: fc.uniqueArray(validCell, { minLength: 1, maxLength: 8, selector: (cell) => `${cell.columnFamily}/${cell.columnName}` }),
    });
    await fc.assert(
      fc.asyncProperty(body, bounds, async (input, tiny) => {
        expect(await validate(insertDataBody, input, tiny)).to.deep.equal(input);
      }),
      { numRuns: 200 },
    );
  });

  it('refuses items that are not objects once each, without a second problem from the column check', async () => {
    const body = { tableName: 't', rowKeyId: 'r', data: [null, 5, cell('cf'), cell('cf')] };
    const expected = [
      { path: 'data[0]', message: 'cell must be of type object' },
      { path: 'data[1]', message: 'cell must be of type object' },
      { path: 'data[3]', message: 'data[3] writes the same column as data[2]' },
    ];
    expect((await refusal(insertDataBody, body)).errors).to.deep.equal(expected);
    expect(everyProblem(insertDataBody, body)).to.deep.equal(expected);
  });

  it('finds a repeated column at the end of 100,000 cells, and names it as joi does in one pass', async function () {
    this.timeout(60_000);
    const data = Array.from({ length: 100_000 }, (_, i) => cell('cf', `c${i}`));
    data[99_999] = cell('cf', 'c7');
    const body = { tableName: 't', rowKeyId: 'r', data };
    const expected = [{ path: 'data[99999]', message: 'data[99999] writes the same column as data[7]' }];
    expect((await refusal(insertDataBody, body)).errors).to.deep.equal(expected);
    expect(everyProblem(insertDataBody, body)).to.deep.equal(expected);
  });

  it("runs an array's item-wise rule once per item, between other work, when the array is taken apart", async function () {
    this.timeout(60_000);
    const counter = new TurnCounter();
    const turnsSeen = new Set<number>();
    let calls = 0;
    const schema = Joi.array()
      .items(Joi.number())
      .custom(
        itemwise(() => (item, index) => {
          calls += 1;
          turnsSeen.add(counter.turns);
          return item === -1 ? { code: 'array.unique', local: { dupePos: index - 1 } } : undefined;
        }),
      )
      .messages({ 'array.unique': '{{#label}} repeats [{{#dupePos}}]' });
    try {
      const numbers = Array.from({ length: 200_000 }, (_, i) => i);
      numbers[150_000] = -1;
      expect((await refusal(schema, numbers)).errors).to.deep.equal([{ path: '[150000]', message: '[150000] repeats [149999]' }]);
    } finally {
      counter.stop();
    }
    // Items after the first problem are not looked at, and the rule's own joi pass did not run it again.
    expect(calls).to.equal(150_001);
    expect(turnsSeen.size, 'turns of the event loop the rule ran in').to.be.above(1);
  });

  it('lets other work run while it checks a large input', async function () {
    this.timeout(60_000);
    const body = { tableName: 't', rowKeyId: 'r', data: Array.from({ length: 100_000 }, (_, i) => cell('cf', `c${i}`)) };
    let ticks = 0;
    const timer = setInterval(() => (ticks += 1), 1);
    try {
      expect(await validate(insertDataBody, body)).to.deep.equal(body);
      expect(ticks, 'timer callbacks while 100,000 cells were checked').to.be.above(5);
    } finally {
      clearInterval(timer);
    }
  });

  it('counts the nodes of a value exactly up to the budget, and past it answers more than the budget (fast-check)', () => {
    const nodes = (value: unknown): number =>
      typeof value !== 'object' || value === null ? 1 : 1 + (Array.isArray(value) ? value : Object.values(value)).reduce<number>((sum, child) => sum + nodes(child), 0);
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), fc.integer({ min: 0, max: 60 }), (value, budget) => {
        const counted = countNodes(value, budget);
        if (nodes(value) <= budget) expect(counted).to.equal(nodes(value));
        else expect(counted).to.be.above(budget);
      }),
      { numRuns: 2000 },
    );
    // Deep or long values are not walked past the budget.
    const deep = JSON.parse('['.repeat(100_000) + ']'.repeat(100_000)) as unknown;
    expect(countNodes(deep, 1000)).to.be.above(1000);
    expect(countNodes(Array.from({ length: 1_000_000 }, () => ({})), 1000)).to.be.above(1000);
  });
});
