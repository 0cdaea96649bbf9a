/**
 * The baseline a team would write instead of kvcrud: Koa, koa-body and the high-level
 * @google-cloud/bigtable client, serving readCellData and insertData in v1's shapes, with no
 * validation, authentication, logging, metrics or problem documents. `npm run bench` starts it
 * beside the service, on the same emulator (BIGTABLE_EMULATOR_HOST, GOOGLE_CLOUD_PROJECT), and
 * holds kvcrud's CPU per request, throughput, latency and memory against it.
 *
 * `PORT=0 node bench/naive-proxy.ts` prints one line with the port it listens on.
 */
import type { AddressInfo } from 'node:net';
import { Bigtable } from '@google-cloud/bigtable';
import Router from '@koa/router';
import Koa from 'koa';
import { koaBody } from 'koa-body';

interface InsertBody {
  tableName: string;
  rowKeyId: string;
  data: Array<{ columnFamily: string; columnName: string; columnValue: string }>;
}

// The client's own metrics export (on by default) looks for Google credentials every 60 s, and
// against the emulator, with none, it ends the process.
const bigtable = new Bigtable({ projectId: process.env['GOOGLE_CLOUD_PROJECT'] ?? 'kvcrud-bench', metricsEnabled: false });
const router = new Router();

router.get('/v1/:instance/readCellData', async (ctx) => {
  const table = bigtable.instance(ctx.params['instance'] ?? '').table(String(ctx.query['tableName']));
  const [row] = await table.row(String(ctx.query['id'])).get();
  const data = Object.entries(row.data as Record<string, Record<string, Array<{ value: string; timestamp: string }>>>).flatMap(([family, columns]) =>
    Object.entries(columns).map(([column, cells]) => ({ columnFamily: family, columnName: column, columnValue: cells[0]?.value, timestamp: cells[0]?.timestamp })),
  );
  ctx.body = { tableName: ctx.query['tableName'], rowKeyId: ctx.query['id'], data };
});

router.post('/v1/:instance/insertData', async (ctx) => {
  const body = ctx.request.body as unknown as InsertBody;
  const table = bigtable.instance(ctx.params['instance'] ?? '').table(body.tableName);
  const data: Record<string, Record<string, string>> = {};
  for (const cell of body.data) (data[cell.columnFamily] ??= {})[cell.columnName] = cell.columnValue;
  await table.insert([{ key: body.rowKeyId, data }]);
  ctx.body = { tableName: body.tableName, rowKeyId: body.rowKeyId, cellsWritten: body.data.length };
});

const app = new Koa();
app.use(koaBody());
app.use(router.routes());
const server = app.listen(Number(process.env['PORT'] ?? 0), () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port, msg: 'naive proxy listening' })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
