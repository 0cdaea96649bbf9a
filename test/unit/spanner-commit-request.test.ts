import { type Spanner, v1, type Transaction } from '@google-cloud/spanner';
import { Server, ServerCredentials, credentials, type MethodDefinition } from '@grpc/grpc-js';
import { expect } from 'chai';
import { queueWrites } from '../../src/store/spanner/client-messages.ts';
import { type CommitEncoder, commitEncoder, joinEncodedMutations } from '../../src/store/spanner/commit-request.ts';
import type { CellWrite } from '../../src/store/spanner/row-writes.ts';
import { Turns } from '../../src/lib/turns.ts';

type Commit = MethodDefinition<object, object>;

/**
 * Commits whose mutations the store encoded as it queued them, sent by the generated client
 * through a stub that joins those encodings, to a gRPC server that keeps the bytes it gets.
 */
describe('Spanner commit requests encoded as mutations are queued', () => {
  let server: Server;
  let client: v1.SpannerClient;
  let commit: Commit;
  let encoder: CommitEncoder;
  const received: Buffer[] = [];

  before(async () => {
    // The generated client's definition of Commit: its stub connects to nothing until a call is made.
    const probe = new v1.SpannerClient({ servicePath: '127.0.0.1', port: 9, sslCreds: credentials.createInsecure(), universeDomain: 'googleapis.com' });
    commit = ((await probe.initialize()) as unknown as { constructor: { service: { Commit: Commit } } }).constructor.service.Commit;
    await probe.close();

    server = new Server();
    // Keeps the request's bytes as they came, and answers with an empty CommitResponse.
    server.addService({ Commit: { ...commit, requestDeserialize: (bytes: Buffer) => bytes, responseSerialize: () => Buffer.alloc(0) } }, {
      Commit: (call: { request: Buffer }, callback: (error: null, response: object) => void) => {
        received.push(call.request);
        callback(null, {});
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
    );
    client = new v1.SpannerClient({ servicePath: '127.0.0.1', port, sslCreds: credentials.createInsecure(), universeDomain: 'googleapis.com' });
    encoder = joinEncodedMutations((await client.initialize()) as never) as CommitEncoder;
    expect(encoder, 'the generated stub has the shape the store expects').to.not.equal(undefined);
  });
  after(async () => {
    await client.close();
    server.forceShutdown();
  });

  const decoded = (bytes: Buffer) => (commit.requestDeserialize as (bytes: Buffer) => object)(bytes);
  const sent = async (request: object) => {
    await client.commit(request);
    return received.at(-1) as Buffer;
  };
  const columns = ['table_id', 'row_key', 'family', 'col_hash', 'ts', 'col', 'value'];
  const upsert = (from: number, count: number) => ({
    insertOrUpdate: {
      table: 'kvcrud_cells',
      columns,
      values: Array.from({ length: count }, (_, i) => ({ values: ['t', 'cm93', 'cf', String(from + i), '1700000000000000', `c${from + i}`, 'dmFsdWU='].map((stringValue) => ({ stringValue })) })),
    },
  });
  const request = (mutations: object[]) => ({
    session: 'projects/p/instances/i/databases/d/sessions/s',
    transactionId: Buffer.from('transaction'),
    requestOptions: { transactionTag: 'tag' },
    mutations,
  });

  it('sends a request whose mutations were all encoded as their encodings joined: the same request', async () => {
    const mutations = [upsert(0, 250), { delete: { table: 'kvcrud_cells', keySet: { keys: [{ values: [{ stringValue: 'k' }] }] } } }, upsert(250, 3)];
    mutations.forEach((mutation) => encoder.encode(mutation));
    const bytes = await sent(request(mutations));
    expect(bytes.equals(commit.requestSerialize(request(mutations))), 'joined, the fields come in another order').to.equal(false);
    expect(decoded(bytes)).to.deep.equal(decoded(commit.requestSerialize(request(mutations))));
  });

  it('sends any other request as the client encodes it', async () => {
    const encoded = upsert(0, 2);
    encoder.encode(encoded);
    // One mutation the store did not encode (as the client's own insert queues it).
    const mixed = request([encoded, upsert(2, 2)]);
    expect((await sent(mixed)).equals(commit.requestSerialize(mixed))).to.equal(true);
    expect((await sent(request([]))).equals(commit.requestSerialize(request([])))).to.equal(true);
  });

  it('queues a 10,000-cell write as mutations of at most 250 rows, lets timers run meanwhile, and sends it whole', async () => {
    const writes: CellWrite[] = Array.from({ length: 10_000 }, (_, i) => ({
      kind: 'upsert',
      row: { table_id: 't', row_key: Buffer.from('row'), family: 'cf', col_hash: Buffer.from([i >> 8, i & 255]), ts: '1700000000000000', col: Buffer.from(`c${i}`), value: Buffer.alloc(64, i) },
    }));
    writes.splice(5000, 0, { kind: 'deleteKey', key: ['t', Buffer.from('row'), 'cf', Buffer.from([0]), '1'] });
    const transaction = { _queuedMutations: [] as Array<{ insertOrUpdate?: { values: unknown[] } }> };
    let ticks = 0;
    const timer = setInterval(() => (ticks += 1), 1);
    try {
      await queueWrites(transaction as unknown as Transaction, writes, new Turns(), encoder);
    } finally {
      clearInterval(timer);
    }
    expect(ticks).to.be.greaterThan(0);
    const queued = transaction._queuedMutations;
    expect(queued.length).to.equal(41);
    expect(Math.max(...queued.map((mutation) => mutation.insertOrUpdate?.values.length ?? 0))).to.equal(250);
    const bytes = await sent(request(queued));
    const whole = commit.requestSerialize(request(queued));
    expect(bytes.equals(whole)).to.equal(false);
    expect(decoded(bytes)).to.deep.equal(decoded(whole));
  });
});

describe('Spanner commit encoder: a client of another shape', () => {
  /** A Spanner object as commitEncoder reads it: its generated SpannerClient in clients_. */
  const spannerWith = (client: unknown) => ({ clients_: new Map([['SpannerClient', client]]) }) as unknown as Spanner;
  const told = () => {
    const reasons: string[] = [];
    return { reasons, unshaped: (why: string) => reasons.push(why) };
  };

  it('says nothing for the generated client it was written for', async () => {
    const generated = new v1.SpannerClient({ servicePath: '127.0.0.1', port: 9, sslCreds: credentials.createInsecure(), universeDomain: 'googleapis.com' });
    const { reasons, unshaped } = told();
    try {
      expect(await commitEncoder(spannerWith(generated), unshaped)).to.not.equal(undefined);
      expect(reasons).to.deep.equal([]);
    } finally {
      await generated.close();
    }
  });

  it('leaves commits to the client and says why when it holds no SpannerClient', async () => {
    const { reasons, unshaped } = told();
    expect(await commitEncoder({} as Spanner, unshaped)).to.equal(undefined);
    expect(reasons).to.deep.equal(['the Spanner object holds no SpannerClient in clients_']);
  });

  it("leaves commits to the client and says why, once per client, when its stub lacks what the store uses", async () => {
    const stub = { commit: () => undefined, constructor: { service: { Commit: { path: '/google.spanner.v1.Spanner/Commit' } } } };
    const client = { initialize: () => Promise.resolve(stub) };
    const { reasons, unshaped } = told();
    expect(await commitEncoder(spannerWith(client), unshaped)).to.equal(undefined);
    expect(await commitEncoder(spannerWith(client), unshaped)).to.equal(undefined);
    expect(reasons).to.deep.equal(["the SpannerClient's stub lacks commit, makeUnaryRequest or its service's Commit definition"]);
  });
});
