/**
 * CPU per MutateRow call in this process, through the generated client's gax method, the bare
 * gRPC stub it wraps, and BigtableStore.mutateRow (which calls the stub; with `--store`), on one
 * emulator in one run. Small batches of calls alternate between
 * the two (which goes first alternates too), so both see the same machine; each batch ends with
 * a young-generation collection, so that it pays for the garbage it made and leaves none to the
 * next batch. Requests and call settings are BigtableStore's (two cells, timestamps set, a
 * deadline, no retries of the client's own).
 *
 * The store's figure over the stub's is what the store itself adds to a write: its family check
 * (cached), retry wrapper, deadline and cancellation, and the conversion of its mutations.
 *
 *   node --expose-gc bench/mutate-row-path.ts [--pairs 30] [--batch 300] [--concurrency 1,32] [--store]
 */
import { parseArgs } from 'node:util';
import { Bigtable, admin, type v2 } from '@google-cloud/bigtable';
import { type Metadata, status } from '@grpc/grpc-js';
import { BigtableStore } from '../src/store/bigtable/bigtable-store.ts';
import { routingHeader } from '../src/store/bigtable/calls.ts';
import { spawnEmulator } from '../test/support/emulator.ts';
import { dataClient } from './ceiling.ts';

const { values } = parseArgs({
  options: {
    pairs: { type: 'string', default: '30' },
    batch: { type: 'string', default: '300' },
    concurrency: { type: 'string', default: '1,32' },
    store: { type: 'boolean', default: false },
  },
});
const pairs = Number(values.pairs);
const batch = Number(values.batch);
const concurrencies = values.concurrency.split(',').map(Number);

interface UnaryStub {
  mutateRow(request: object, metadata: Metadata, options: { deadline: number }, callback: (error: Error | null) => void): unknown;
}

const PROJECT = 'bench';
const collectYoung = (globalThis as { gc?: (options: object) => void }).gc;
if (collectYoung === undefined) throw new Error('run with node --expose-gc');
const emulator = await spawnEmulator();
try {
  const settings = new Bigtable({ projectId: PROJECT, apiEndpoint: emulator.host, universeDomain: 'googleapis.com', metricsEnabled: false }).options;
  const tableAdmin = new admin.v2.BigtableTableAdminClient(settings.BigtableTableAdminClient);
  const parent = `projects/${PROJECT}/instances/bench`;
  await tableAdmin.createTable({ parent, tableId: 'writes', table: { columnFamilies: { cf: {} } } });
  const tableName = `${parent}/tables/writes`;
  const client: v2.BigtableClient = dataClient(PROJECT, emulator.host);
  const stub = (await client.initialize()) as unknown as UnaryStub;

  let sequence = 0;
  const request = () => {
    const timestampMicros = (BigInt(Date.now()) * 1000n).toString();
    return {
      tableName,
      rowKey: Buffer.from(`row-${sequence++}`),
      mutations: ['a', 'b'].map((column) => ({ setCell: { familyName: 'cf', columnQualifier: Buffer.from(column), timestampMicros, value: Buffer.from('value-0123456789') } })),
    };
  };
  const paths: Record<string, () => Promise<unknown>> = {
    gax: () => client.mutateRow(request(), { timeout: 5000, retry: null, retryRequestOptions: { retries: 0, noResponseRetries: 0 } } as never),
    stub: () =>
      new Promise<void>((resolve, reject) => {
        stub.mutateRow(request(), routingHeader(tableName), { deadline: Date.now() + 5000 }, (error) => (error ? reject(error) : resolve()));
      }),
  };
  const store = new BigtableStore({ projectId: PROJECT, instanceIds: ['bench'], emulatorHost: emulator.host });
  if (values.store) {
    const ref = { instance: 'bench', table: 'writes' };
    paths['store'] = () => {
      const timestampMicros = BigInt(Date.now()) * 1000n;
      const mutations = ['a', 'b'].map((column) => ({ type: 'set' as const, family: 'cf', column: Buffer.from(column), value: Buffer.from('value-0123456789'), timestampMicros }));
      return store.mutateRow(ref, Buffer.from(`row-${sequence++}`), mutations, { deadline: Date.now() + 5000 });
    };
  }
  const names = Object.keys(paths);

  /** CPU µs of this process per call for `count` calls by `concurrency` callers, young garbage included. */
  async function measure(call: () => Promise<unknown>, count: number, concurrency: number): Promise<number> {
    collectYoung?.({ type: 'minor', execution: 'sync' });
    let left = count;
    const caller = async () => {
      while (left-- > 0) await call();
    };
    const cpuBefore = process.cpuUsage();
    await Promise.all(Array.from({ length: concurrency }, caller));
    collectYoung?.({ type: 'minor', execution: 'sync' });
    const cpu = process.cpuUsage(cpuBefore);
    return (cpu.user + cpu.system) / count;
  }

  const median = (numbers: number[]) => [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)] ?? 0;
  const mean = (numbers: number[]) => numbers.reduce((sum, value) => sum + value, 0) / numbers.length;
  for (const concurrency of concurrencies) {
    for (let warmup = 0; warmup < 3; warmup++) for (const call of Object.values(paths)) await measure(call, batch, concurrency);
    const perPath: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
    const ratios: Record<string, number[]> = { 'stub/gax': [], 'store/stub': [] };
    for (let round = 0; round < pairs; round++) {
      // Each path goes first in turn.
      const order = names.map((_, index) => names[(index + round) % names.length] as string);
      for (const name of order) perPath[name]?.push(await measure(paths[name] as () => Promise<unknown>, batch, concurrency));
      ratios['stub/gax']?.push((perPath['stub']?.at(-1) ?? 0) / (perPath['gax']?.at(-1) ?? 1));
      if (values.store) ratios['store/stub']?.push((perPath['store']?.at(-1) ?? 0) / (perPath['stub']?.at(-1) ?? 1));
    }
    const figures = names.map((name) => `${name} median ${median(perPath[name] ?? []).toFixed(1)} µs/call (mean ${mean(perPath[name] ?? []).toFixed(1)})`);
    const perRound = Object.entries(ratios)
      .filter(([, values]) => values.length > 0)
      .map(([name, values]) => `${name} per round: median ${median(values).toFixed(2)}, quartiles ${quartiles(values)}`);
    console.log(`concurrency ${concurrency}, ${pairs} rounds of ${batch} calls: ${figures.join(', ')}; ${perRound.join('; ')}`);
  }
  await store.close();
  await client.close();
  await tableAdmin.close();
} catch (error) {
  process.exitCode = 1;
  console.error(error);
  if ((error as { code?: number }).code === status.UNAVAILABLE) console.error('the emulator did not answer');
} finally {
  emulator.process.kill('SIGTERM');
}

function quartiles(numbers: number[]): string {
  const sorted = [...numbers].sort((a, b) => a - b);
  const at = (q: number) => (sorted[Math.floor(q * (sorted.length - 1))] ?? 0).toFixed(2);
  return `${at(0.25)}-${at(0.75)}`;
}
