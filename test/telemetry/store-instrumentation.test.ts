/**
 * InstrumentedStore around a real store (the embedded driver's, on the DataStore contract): the
 * check before every call, one span and one metric sample per call labelled by the store's name,
 * scans measured over their whole iteration, and no caller data on spans.
 */
import { spanRecorder } from '../support/tracing.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { expect } from 'chai';
import { embeddedDriver } from '../../src/store/embedded/driver.ts';
import { isStoreError } from '../../src/store/errors.ts';
import { InstrumentedStore } from '../../src/store/instrumented-store.ts';
import type { CallOptions, DataStore, Mutation, Row, TableRef } from '../../src/store/store.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { type Metrics, createMetrics } from '../../src/telemetry/metrics.ts';
import { parseSamples, sampleValue } from '../support/prometheus.ts';

const REF: TableRef = { instance: 'local', table: 'orders' };
const set = (column: string, value: string): Mutation => ({
  type: 'set',
  family: 'cf',
  column: Buffer.from(column),
  value: Buffer.from(value),
  timestampMicros: 1_000_000n,
});
const later = (): CallOptions => ({ deadline: Date.now() + 5000 });

/** Runs `work` under a span of its own and returns the store spans it made, in start order. */
async function spansOf(work: () => Promise<unknown>): Promise<ReadableSpan[]> {
  const traceId = await trace.getTracer('test').startActiveSpan('test', async (parent) => {
    try {
      await work();
    } catch {
      // The spans say how it failed.
    } finally {
      parent.end();
    }
    return parent.spanContext().traceId;
  });
  return spanRecorder.spansOf(traceId).filter((span) => span.name.startsWith('DataStore.'));
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('the call succeeded');
}

describe('InstrumentedStore', () => {
  let directory: string;
  let raw: DataStore;
  let store: InstrumentedStore;
  let metrics: Metrics;

  before(async () => {
    spanRecorder.start();
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-instrumented-'));
    raw = await embeddedDriver.open({ name: 'archive', instances: ['local'], settings: { dataDir: directory } }, { logger: createLogger('silent') });
    metrics = createMetrics();
    store = new InstrumentedStore(raw, { name: 'archive', driver: 'embedded' }, { duration: metrics.storeOperationDuration, tracer: trace.getTracer('kvcrud') });
    await store.createTable(REF, [{ name: 'cf' }], later());
    for (const key of ['secret-a', 'secret-b', 'secret-c', 'secret-d']) await store.mutateRow(REF, Buffer.from(key), [set('col', key)], later());
  });
  after(async () => {
    spanRecorder.stop();
    await store.close();
    rmSync(directory, { recursive: true, force: true });
  });

  async function count(operation: string, code: string): Promise<number | undefined> {
    return sampleValue(parseSamples(await metrics.registry.metrics()), 'kvcrud_store_operation_duration_seconds_count', { store: 'archive', operation, code });
  }

  it("publishes the store's capabilities and limits unchanged", () => {
    expect(store.capabilities).to.equal(raw.capabilities);
    expect(store.limits).to.equal(raw.limits);
  });

  it('makes one span per call, named by operation and labelled by store name, driver, instance and table', async () => {
    const before = (await count('readRows', 'OK')) ?? 0;
    const spans = await spansOf(() => store.readRows(REF, [Buffer.from('secret-a'), Buffer.from('missing')], { versions: 1 }, later()));
    expect(spans.map((span) => span.name)).to.deep.equal(['DataStore.readRows']);
    expect(spans[0]?.attributes).to.deep.include({
      'kvcrud.store': 'archive',
      'db.system.name': 'embedded',
      'db.operation.name': 'readRows',
      'db.namespace': 'local',
      'db.collection.name': 'orders',
      'db.operation.batch.size': 2,
    });
    expect(await count('readRows', 'OK')).to.equal(before + 1);
  });

  it('records a failure by its StoreError code on the span and in the metric', async () => {
    const spans = await spansOf(() => store.describeTable({ instance: 'local', table: 'missing' }, later()));
    expect(spans[0]?.status).to.deep.equal({ code: SpanStatusCode.ERROR, message: 'NOT_FOUND' });
    expect(spans[0]?.attributes['error.type']).to.equal('NOT_FOUND');
    expect(await count('describeTable', 'NOT_FOUND')).to.equal(1);
  });

  it('refuses a call whose deadline has passed, or whose caller has gone, before it reaches the store', async () => {
    const late = await rejection(store.mutateRow(REF, Buffer.from('late'), [set('col', 'x')], { deadline: Date.now() - 1 }));
    expect(isStoreError(late, 'DEADLINE_EXCEEDED')).to.equal(true);
    // This layer's words: the call never reached the store, whose own check says otherwise.
    expect((late as Error).message).to.equal('the deadline passed before the call started');
    const gone = new AbortController();
    gone.abort();
    const abandoned = await rejection(store.mutateRow(REF, Buffer.from('gone'), [set('col', 'x')], { deadline: Date.now() + 5000, signal: gone.signal }));
    expect(isStoreError(abandoned, 'DEADLINE_EXCEEDED')).to.equal(true);
    expect((abandoned as Error).message).to.match(/caller disconnected/);
    // Neither write reached the store.
    expect(await raw.readRows(REF, [Buffer.from('late'), Buffer.from('gone')], { versions: 1 }, later())).to.deep.equal([null, null]);
    expect(await count('mutateRow', 'DEADLINE_EXCEEDED')).to.equal(2);
  });

  it("measures a scan over its whole iteration, and counts the rows the caller took", async () => {
    let rows: Row[] = [];
    const spans = await spansOf(async () => {
      rows = [];
      for await (const row of store.scanRows(REF, { range: {}, reverse: false, limit: 10, versions: 1 }, later())) {
        rows.push(row);
        await new Promise((resolve) => setTimeout(resolve, 60));
      }
    });
    expect(rows.map((row) => row.key.toString())).to.deep.equal(['secret-a', 'secret-b', 'secret-c', 'secret-d']);
    const [scan] = spans;
    expect(scan?.name).to.equal('DataStore.scanRows');
    expect(scan?.attributes).to.deep.include({ 'kvcrud.rows': 4, 'kvcrud.scan.limit': 10, 'kvcrud.scan.reverse': false });
    // The caller's pauses between rows are inside the span: it ended after the last row was taken.
    const durationMs = (scan?.duration[0] ?? 0) * 1000 + (scan?.duration[1] ?? 0) / 1e6;
    expect(durationMs).to.be.at.least(4 * 60 - 10);
    expect(await count('scanRows', 'OK')).to.equal(1);
  });

  it('ends the span of a scan the caller stops early, and releases the scan', async () => {
    const spans = await spansOf(async () => {
      for await (const row of store.scanRows(REF, { range: { start: Buffer.from('secret-b') }, reverse: false, limit: 10, versions: 1 }, later())) {
        if (row.key.toString() === 'secret-c') break;
      }
    });
    expect(spans).to.have.length(1);
    expect(spans[0]?.attributes['kvcrud.rows']).to.equal(2);
    expect(spans[0]?.status.code).to.equal(SpanStatusCode.UNSET);
    // The store is free for the next call.
    await store.mutateRow(REF, Buffer.from('secret-e'), [set('col', 'e')], later());
  });

  it('fails a scan of a missing table at its first row, on its span', async () => {
    const spans = await spansOf(async () => {
      const scan = store.scanRows({ instance: 'local', table: 'missing' }, { range: {}, reverse: false, limit: 1, versions: 1 }, later());
      await scan[Symbol.asyncIterator]().next();
    });
    expect(spans[0]?.attributes['error.type']).to.equal('NOT_FOUND');
    expect(await count('scanRows', 'NOT_FOUND')).to.equal(1);
  });

  it('never puts row keys, key bounds, columns or values on a span', async () => {
    const spans = await spansOf(async () => {
      await store.mutateRows(REF, [{ key: Buffer.from('secret-f'), mutations: [set('secret-column', 'secret-value')] }], later());
      await store.readRows(REF, [Buffer.from('secret-f')], { columns: [{ family: 'cf', column: Buffer.from('secret-column') }], versions: 1 }, later());
      let scanned = 0;
      for await (const row of store.scanRows(REF, { range: { start: Buffer.from('secret-start'), end: Buffer.from('secret-z') }, reverse: true, limit: 2, versions: 1 }, later())) {
        scanned += row.cells.length;
      }
      expect(scanned).to.equal(2);
    });
    expect(spans.map((span) => span.name)).to.deep.equal(['DataStore.mutateRows', 'DataStore.readRows', 'DataStore.scanRows']);
    expect(spans[0]?.attributes).to.deep.include({ 'db.operation.batch.size': 1, 'kvcrud.entries.failed': 0 });
    expect(JSON.stringify(spans.map((span) => span.attributes))).to.not.contain('secret');
  });
});
