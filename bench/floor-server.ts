/**
 * The floor: the least an HTTP/JSON gateway to Bigtable written in Node can do per request.
 * `node:http` with no framework, JSON.parse and JSON.stringify, and the one gRPC call the Bigtable
 * store makes, on the generated client's bare stub (readRows of one row with the latest cell per
 * column; mutateRow of the row's cells). No validation, routing, authentication, logging, metrics,
 * retries or deadlines beyond the call's own.
 *
 * It answers only the benchmark's two v1 requests. `npm run bench` starts it beside the service
 * and the naive proxy, on the same emulator, so that the CPU any gateway must spend per request
 * (HTTP parsing, the socket writes, the gRPC call) is measured in the same run as kvcrud's.
 *
 * With `--koa` it serves the same calls under Koa, @koa/router and koa-body (kvcrud's HTTP stack):
 * the least a gateway built on that stack can cost.
 *
 * `PORT=0 node bench/floor-server.ts [--koa]` prints one line with the port it listens on.
 */
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Metadata } from '@grpc/grpc-js';
import { type protos } from '@google-cloud/bigtable';
import Router from '@koa/router';
import Koa from 'koa';
import { koaBody } from 'koa-body';
import { routingHeader } from '../src/store/bigtable/calls.ts';
import { dataClient } from './ceiling.ts';

type ReadRowsResponse = protos.google.bigtable.v2.IReadRowsResponse;
interface InsertBody {
  tableName: string;
  rowKeyId: string;
  data: Array<{ columnFamily: string; columnName: string; columnValue: string }>;
}
interface Stub {
  readRows(request: object, metadata: Metadata): NodeJS.EventEmitter;
  mutateRow(request: object, metadata: Metadata, callback: (error: Error | null) => void): void;
}

const project = process.env['GOOGLE_CLOUD_PROJECT'] ?? 'kvcrud-bench';
const client = dataClient(project, process.env['BIGTABLE_EMULATOR_HOST'] ?? '');
const stub = (await client.initialize()) as unknown as Stub;

function tablePath(instance: string, table: string): string {
  return `projects/${project}/instances/${instance}/tables/${table}`;
}

function read(instance: string, table: string, rowKey: string, done: (error: Error | null, body?: string) => void): void {
  const tableName = tablePath(instance, table);
  const request = { tableName, rows: { rowKeys: [Buffer.from(rowKey)] }, rowsLimit: 1, filter: { cellsPerColumnLimitFilter: 1 } };
  const data: Array<{ columnFamily: string; columnName: string; columnValue: string; timestamp: string }> = [];
  let family = '';
  let column = '';
  const call = stub.readRows(request, routingHeader(tableName));
  // The emulator sends each cell in one chunk; family and qualifier carry over from the previous.
  call.on('data', (response: ReadRowsResponse) => {
    for (const chunk of response.chunks ?? []) {
      if (chunk.familyName?.value) family = chunk.familyName.value;
      if (chunk.qualifier?.value) column = Buffer.from(chunk.qualifier.value).toString();
      data.push({ columnFamily: family, columnName: column, columnValue: Buffer.from(chunk.value ?? []).toString(), timestamp: String(chunk.timestampMicros) });
    }
  });
  call.on('error', (error: Error) => done(error));
  call.on('end', () => done(null, JSON.stringify({ tableName: table, rowKeyId: rowKey, data })));
}

function insert(instance: string, body: InsertBody, done: (error: Error | null, body?: string) => void): void {
  const tableName = tablePath(instance, body.tableName);
  const timestampMicros = (BigInt(Date.now()) * 1000n).toString();
  const mutations = body.data.map((cell) => ({
    setCell: { familyName: cell.columnFamily, columnQualifier: Buffer.from(cell.columnName), timestampMicros, value: Buffer.from(cell.columnValue) },
  }));
  stub.mutateRow({ tableName, rowKey: Buffer.from(body.rowKeyId), mutations }, routingHeader(tableName), (error) =>
    done(error, JSON.stringify({ tableName: body.tableName, rowKeyId: body.rowKeyId, cellsWritten: body.data.length })),
  );
}

/** The same calls under Koa, @koa/router and koa-body: the floor of a gateway on kvcrud's stack. */
function koaApp() {
  const promised = (start: (done: (error: Error | null, body?: string) => void) => void) =>
    new Promise<string>((resolve, reject) => start((error, body) => (error === null ? resolve(body ?? '') : reject(error))));
  const router = new Router();
  router.get('/v1/:instance/readCellData', async (ctx) => {
    ctx.type = 'application/json';
    ctx.body = await promised((done) => read(ctx.params['instance'] ?? '', String(ctx.query['tableName']), String(ctx.query['id']), done));
  });
  router.post('/v1/:instance/insertData', async (ctx) => {
    ctx.type = 'application/json';
    ctx.body = await promised((done) => insert(ctx.params['instance'] ?? '', ctx.request.body as unknown as InsertBody, done));
  });
  const app = new Koa();
  app.use(koaBody());
  app.use(router.routes());
  return app.callback();
}

function bare(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://floor');
  const [, version, instance = '', operation] = url.pathname.split('/');
  const answer = (error: Error | null, body?: string) => {
    res.writeHead(error === null ? 200 : 500, { 'content-type': 'application/json' });
    res.end(error === null ? body : JSON.stringify({ error: error.message }));
  };
  if (version === 'v1' && operation === 'readCellData' && req.method === 'GET') {
    read(instance, url.searchParams.get('tableName') ?? '', url.searchParams.get('id') ?? '', answer);
    return;
  }
  if (version === 'v1' && operation === 'insertData' && req.method === 'POST') {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => insert(instance, JSON.parse(Buffer.concat(chunks).toString()) as InsertBody, answer));
    return;
  }
  res.writeHead(404).end();
}

const koa = koaApp();
const server = createServer(process.argv.includes('--koa') ? (req, res) => void koa(req, res) : bare);
server.listen(Number(process.env['PORT'] ?? 0), () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port, msg: 'floor server listening' })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
