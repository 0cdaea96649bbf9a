/**
 * A client generated from the OpenAPI document, as its users make one: openapi-typescript's types
 * of the served document and openapi-fetch. A small program written against them is compiled with
 * `strict` (it must not compile if the types admit what the service refuses: a mutation, a condition
 * or a rule of none or two shapes), then runs the README's v1 and v2 tours against the service.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect } from 'chai';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { useTestApp } from '../support/test-app.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * The program, written as a user of the generated types writes one. It must compile: every
 * request and answer is typed from the document, and the `@ts-expect-error` lines fail the
 * compilation unless the types refuse those mutations, conditions and rules.
 */
const PROGRAM = `
import createClient from 'openapi-fetch';
import type { components, paths } from './kvcrud.js';

type Mutation = components['schemas']['RowsMutateRequest']['mutations'][number];

// @ts-expect-error -- a mutation has one of its four forms
export const none: Mutation = {};
// @ts-expect-error -- and only one of them
export const two: Mutation = { set: { family: 'cf', column: 'status', value: 'new' }, deleteRow: {} };
export const one: Mutation = { deleteFamily: { family: 'cf' } };

type Condition = components['schemas']['RowsCheckAndMutateRequest']['conditions'][number];
type EntryCondition = NonNullable<components['schemas']['RowsBatchWriteRequest']['entries'][number]['conditions']>[number];
type Rule = components['schemas']['RowsReadModifyWriteRequest']['rules'][number];

// @ts-expect-error -- a condition has one of its four shapes
export const noCondition: Condition = {};
// @ts-expect-error -- and only one of them: not a column's exists and a value's equals
export const existsAndEquals: Condition = { family: 'cf', column: 'status', equals: 'new', exists: true };
// @ts-expect-error -- nor the row's and a family's
export const rowAndFamily: Condition = { rowExists: true, family: 'cf' };
// @ts-expect-error -- nor a family's with an encoding, which only a column's and a value's take
export const familyEncoded: Condition = { family: 'cf', exists: true, encoding: 'base64' };
// @ts-expect-error -- a batch entry's conditions are the same union
export const entryMixed: EntryCondition = { rowExists: false, family: 'cf', exists: false };
export const conditions: Condition[] = [
  { rowExists: false },
  { family: 'cf', exists: true },
  { family: 'cf', column: 'status', exists: false },
  { family: 'cf', column: 'c3RhdHVz', exists: true, encoding: 'base64' },
  { family: 'cf', column: 'status', equals: 'new' },
  { family: 'cf', column: 'c3RhdHVz', equals: 'bmV3', encoding: 'base64' },
];
export const entryConditions: EntryCondition[] = conditions;
// @ts-expect-error -- a rule has one of its two shapes
export const noRule: Rule = { family: 'cf', column: 'n' };
// @ts-expect-error -- and only one of them: not an increment and an append
export const incrementAndAppend: Rule = { family: 'cf', column: 'n', increment: 1, append: '.' };
export const rules: Rule[] = [
  { family: 'cf', column: 'n', increment: 1 },
  { family: 'cf', column: 'n', increment: '-9223372036854775808' },
  { family: 'cf', column: 'bg==', increment: 2, encoding: 'base64' },
  { family: 'cf', column: 'log', append: '.' },
  { family: 'cf', column: 'bG9n', append: 'Lg==', encoding: 'base64' },
];

function check(condition: boolean, what: string): void {
  if (!condition) throw new Error(what);
}

/** Runs the README's tours; returns what each step answered, in order. */
export async function run(baseUrl: string, store: string, instance: string): Promise<string[]> {
  // The document says array query parameters are comma-separated (style form, explode false).
  const client = createClient<paths>({ baseUrl, querySerializer: { array: { style: 'form', explode: false } } });
  const steps: string[] = [];

  // v1
  const v1 = { params: { path: { instanceID: instance } } };
  const created = await client.POST('/v1/{instanceID}/createTable', { ...v1, body: { tableName: 'orders', columnFamily: 'cf' } });
  check(created.response.status === 201 && created.data?.tableName === 'orders', 'v1 createTable');
  steps.push('v1 createTable ' + created.response.status);
  const inserted = await client.POST('/v1/{instanceID}/insertData', {
    ...v1,
    body: {
      tableName: 'orders',
      rowKeyId: 'order#1001',
      data: [
        { columnFamily: 'cf', columnName: 'status', columnValue: 'shipped' },
        { columnFamily: 'cf', columnName: 'total', columnValue: '42.50' },
      ],
    },
  });
  const cellsWritten: number | undefined = inserted.data?.cellsWritten;
  check(cellsWritten === 2, 'v1 insertData');
  steps.push('v1 insertData ' + inserted.response.status);
  const read = await client.GET('/v1/{instanceID}/readCellData', { params: { path: { instanceID: instance }, query: { tableName: 'orders', id: 'order#1001' } } });
  check(read.data?.data.map((cell) => cell.columnName + '=' + cell.columnValue).join(',') === 'status=shipped,total=42.50', 'v1 readCellData');
  steps.push('v1 readCellData ' + read.response.status);
  const missing = await client.GET('/v1/{instanceID}/readCellData', { params: { path: { instanceID: instance }, query: { tableName: 'orders', id: 'order#9999' } } });
  check(missing.error?.code === 'ROW_NOT_FOUND', 'v1 readCellData of a missing row');
  steps.push('v1 readCellData ' + missing.response.status + ' ' + missing.error?.code);
  const deleted = await client.DELETE('/v1/{instanceID}/deleteTable', { ...v1, body: { tableList: ['orders'] } });
  steps.push('v1 deleteTable ' + deleted.response.status);

  // v2
  const stores = await client.GET('/v2/stores');
  const described = stores.data?.stores.find((candidate) => candidate.name === store);
  check(described?.instances.includes(instance) === true && typeof described.limits.keyBytes === 'number', 'v2 stores');
  steps.push('v2 stores.list ' + stores.response.status);
  const at = { store, instance };
  const table = { ...at, table: 'orders' };
  const tableCreated = await client.POST('/v2/stores/{store}/instances/{instance}/tables', {
    params: { path: at },
    body: { name: 'orders', families: [{ name: 'cf', maxVersions: 3 }, { name: 'meta', maxAgeSeconds: 86400 }] },
  });
  steps.push('v2 tables.create ' + tableCreated.response.status);
  await client.POST('/v2/stores/{store}/instances/{instance}/tables', { params: { path: at }, body: { name: 'customers', families: [{ name: 'cf' }] } });
  const tables = await client.GET('/v2/stores/{store}/instances/{instance}/tables', { params: { path: at } });
  check(tables.data?.tables.join(',') === 'customers,orders', 'v2 tables.list');
  steps.push('v2 tables.list ' + tables.response.status);
  const got = await client.GET('/v2/stores/{store}/instances/{instance}/tables/{table}', { params: { path: table } });
  check(got.data?.families.map((family) => family.name).join(',') === 'cf,meta', 'v2 tables.get');
  steps.push('v2 tables.get ' + got.response.status);
  const row = { ...table, key: 'order#1001' };
  const written = await client.PUT('/v2/stores/{store}/instances/{instance}/tables/{table}/rows/{key}', {
    params: { path: row },
    body: { cells: [{ family: 'cf', column: 'status', value: 'shipped' }, { family: 'cf', column: 'total', value: '42.50' }] },
  });
  check(written.data?.cellsWritten === 2, 'v2 rows.write');
  steps.push('v2 rows.write ' + written.response.status);
  const rowRead = await client.GET('/v2/stores/{store}/instances/{instance}/tables/{table}/rows/{key}', {
    params: { path: row, query: { columns: ['cf:status', 'cf:total'] } },
  });
  check(rowRead.data?.cells.map((cell) => cell.column).join(',') === 'status,total', 'v2 rows.get');
  steps.push('v2 rows.get ' + rowRead.response.status);
  const mutations: Mutation[] = [{ set: { family: 'cf', column: 'status', value: 'delivered' } }, { deleteColumn: { family: 'cf', column: 'total' } }];
  const mutated = await client.POST('/v2/stores/{store}/instances/{instance}/tables/{table}/rows/{key}:mutate', { params: { path: row }, body: { mutations } });
  check(mutated.data?.mutationsApplied === 2, 'v2 rows.mutate');
  steps.push('v2 rows.mutate ' + mutated.response.status);
  const batch = await client.POST('/v2/stores/{store}/instances/{instance}/tables/{table}/rows:batchWrite', {
    params: { path: table },
    body: {
      entries: [
        { key: 'order#1002', mutations: [{ set: { family: 'cf', column: 'status', value: 'new' } }] },
        { key: 'order#1003', mutations: [{ set: { family: 'cf', column: 'status', value: 'new' } }] },
        { key: 'order#1004', mutations: [{ set: { family: 'notes', column: 'text', value: 'fragile' } }] },
      ],
    },
  });
  steps.push('v2 rows.batchWrite ' + batch.response.status + ' ' + (batch.data?.results.map((result) => result.code).join(',') ?? ''));
  const page = await client.GET('/v2/stores/{store}/instances/{instance}/tables/{table}/rows', { params: { path: table, query: { prefix: 'order#', pageSize: 2 } } });
  const pageToken = page.data?.nextPageToken;
  check(page.data?.rows.length === 2 && pageToken !== undefined, 'v2 rows.scan');
  const next = await client.GET('/v2/stores/{store}/instances/{instance}/tables/{table}/rows', {
    params: { path: table, query: { prefix: 'order#', pageSize: 2, ...(pageToken === undefined ? {} : { pageToken }) } },
  });
  steps.push('v2 rows.scan ' + [...(page.data?.rows ?? []), ...(next.data?.rows ?? [])].map((scanned) => scanned.key).join(','));
  const gotRows = await client.POST('/v2/stores/{store}/instances/{instance}/tables/{table}/rows:batchGet', {
    params: { path: table },
    body: { keys: ['order#1003', 'order#9999', 'order#1001'], columns: ['cf:status'] },
  });
  steps.push('v2 rows.batchGet ' + (gotRows.data?.rows.map((found) => found.key + '=' + String(found.found)).join(',') ?? ''));
  const rowDeleted = await client.DELETE('/v2/stores/{store}/instances/{instance}/tables/{table}/rows/{key}', { params: { path: { ...table, key: 'order#1002' } } });
  steps.push('v2 rows.delete ' + rowDeleted.response.status);
  const batchDeleted = await client.POST('/v2/stores/{store}/instances/{instance}/tables:batchDelete', { params: { path: at }, body: { tables: ['customers'] } });
  steps.push('v2 tables.batchDelete ' + (batchDeleted.data?.deleted.join(',') ?? ''));
  const tableDeleted = await client.DELETE('/v2/stores/{store}/instances/{instance}/tables/{table}', { params: { path: table } });
  steps.push('v2 tables.delete ' + tableDeleted.response.status);
  const gone = await client.GET('/v2/stores/{store}/instances/{instance}/tables/{table}', { params: { path: table } });
  steps.push('v2 tables.get ' + gone.response.status + ' ' + (gone.error?.code ?? ''));
  return steps;
}
`;

let previous: ts.Program | undefined;

/** Compiles the program with `strict` (emitting it when `emit`); answers the diagnostics, as text. */
function compile(directory: string, emit: boolean): string[] {
  const options: ts.CompilerOptions = {
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2024.d.ts', 'lib.dom.d.ts'],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: [],
    // The libraries' own declarations are taken as they are: only the program and the document's types are checked.
    skipLibCheck: true,
    outDir: directory,
    noEmit: !emit,
  };
  // The previous program's unchanged files (the libraries) are reused.
  const program = ts.createProgram({ rootNames: [join(directory, 'flows.ts')], options, ...(previous === undefined ? {} : { oldProgram: previous }) });
  previous = program;
  const emitted = emit ? program.emit().diagnostics : [];
  return [...ts.getPreEmitDiagnostics(program), ...emitted].map((diagnostic) =>
    ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n').concat(diagnostic.file === undefined ? '' : ` (${diagnostic.file.fileName}:${diagnostic.start ?? 0})`),
  );
}

describe('a client generated from the OpenAPI document', function () {
  this.timeout(60_000);
  const app = useTestApp();
  // Under node_modules, so that the program finds openapi-fetch as an installed package does.
  const directory = join(ROOT, 'node_modules', '.cache', `kvcrud-typed-client-${process.pid}`);
  let types = '';

  before(async () => {
    const document = (await (await fetch(new URL('/openapi.json', app().baseUrl))).json()) as Record<string, unknown>;
    // openapi-typescript takes the document's own types, as a user's `npx openapi-typescript` does.
    types = astToString(await openapiTS(document as unknown as Parameters<typeof openapiTS>[0]));
    mkdirSync(directory, { recursive: true });
    writeFileSync(join(directory, 'package.json'), JSON.stringify({ type: 'module' }));
    writeFileSync(join(directory, 'kvcrud.ts'), types);
    writeFileSync(join(directory, 'flows.ts'), PROGRAM);
  });
  after(() => {
    rmSync(directory, { recursive: true, force: true });
  });

  it('types a mutation as a union of its four forms', () => {
    expect(types).to.match(/set\?: never;/).and.match(/deleteRow\?: never;/);
  });

  it('types a condition as a union of its four shapes and a rule as a union of its two', () => {
    for (const member of ['rowExists', 'family', 'column', 'exists', 'equals', 'encoding', 'increment', 'append']) expect(types).to.match(new RegExp(`\\b${member}\\?: never;`), member);
  });

  it('compiles a program against the types with strict, which refuses a mutation, a condition or a rule of no shape or two', () => {
    expect(compile(directory, true)).to.deep.equal([]);
  });

  it("runs the README's v1 and v2 tours", async () => {
    const { run } = (await import(pathToFileURL(join(directory, 'flows.js')).href)) as { run: (baseUrl: string, store: string, instance: string) => Promise<string[]> };
    expect(await run(app().baseUrl, app().storeName, app().instance)).to.deep.equal([
      'v1 createTable 201',
      'v1 insertData 200',
      'v1 readCellData 200',
      'v1 readCellData 404 ROW_NOT_FOUND',
      'v1 deleteTable 200',
      'v2 stores.list 200',
      'v2 tables.create 201',
      'v2 tables.list 200',
      'v2 tables.get 200',
      'v2 rows.write 200',
      'v2 rows.get 200',
      'v2 rows.mutate 200',
      'v2 rows.batchWrite 200 OK,OK,COLUMN_FAMILY_NOT_FOUND',
      'v2 rows.scan order#1001,order#1002,order#1003',
      'v2 rows.batchGet order#1003=true,order#9999=false,order#1001=true',
      'v2 rows.delete 204',
      'v2 tables.batchDelete customers',
      'v2 tables.delete 204',
      'v2 tables.get 404 TABLE_NOT_FOUND',
    ]);
  });

  it('would not compile if the types took a mutation, a condition or a rule of two shapes', () => {
    const members = 'set|deleteColumn|deleteFamily|deleteRow|rowExists|family|column|exists|equals|encoding|increment|append';
    writeFileSync(join(directory, 'kvcrud.ts'), types.replaceAll(new RegExp(`^(\\s+)(${members})\\?: never;$`, 'gm'), ''));
    const unused = compile(directory, false).filter((diagnostic) => diagnostic.startsWith("Unused '@ts-expect-error' directive"));
    // The declaration each unused directive stands above, by name.
    const names = unused.map((diagnostic) => {
      const start = Number(/:(\d+)\)$/.exec(diagnostic)?.[1]);
      return /^export const (\w+)/m.exec(PROGRAM.slice(start))?.[1];
    });
    expect(names).to.deep.equal(['two', 'existsAndEquals', 'rowAndFamily', 'familyEncoded', 'entryMixed', 'incrementAndAppend']);
  });
});
