import { Bigtable, v2 } from '@google-cloud/bigtable';
import { expect } from 'chai';
import type { BigtableStub } from '../../src/store/bigtable/calls.ts';
import { encodeMutateRow, encodeMutateRows } from '../../src/store/bigtable/mutation-requests.ts';
import { toProtoMutation } from '../../src/store/bigtable/mutations.ts';
import { ReadRowsDecoder, fieldPieces } from '../../src/store/bigtable/read-rows-messages.ts';
import { Turns } from '../../src/lib/turns.ts';
import type { Mutation } from '../../src/store/store.ts';

/**
 * The messages the store encodes and decodes a slice at a time, checked against the generated
 * client's own serializers (the stub connects to nothing until a call is made).
 */
describe('Bigtable messages in slices', () => {
  let client: v2.BigtableClient;
  let stub: BigtableStub;

  before(async () => {
    const settings = new Bigtable({ projectId: 'p', apiEndpoint: '127.0.0.1:9', universeDomain: 'googleapis.com', metricsEnabled: false }).options;
    client = new v2.BigtableClient(settings.BigtableClient);
    stub = (await client.initialize()) as unknown as BigtableStub;
  });
  after(async () => {
    await client.close();
  });
  // What the server side of ReadRows sends.
  const serializeResponse = (response: object) => (stub.readRows as unknown as { responseSerialize: (response: object) => Buffer }).responseSerialize(response);

  const kinds: Mutation[] = [
    { type: 'set', family: 'f', column: Buffer.from([0, 0xff]), value: Buffer.from('v'), timestampMicros: 9_007_199_254_740_993_000n },
    { type: 'deleteColumn', family: 'g', column: Buffer.from('c') },
    { type: 'deleteFamily', family: 'h' },
    { type: 'deleteRow' },
  ];
  // More than one piece of mutations; a value large enough for a multi-byte length.
  const mutations = Array.from({ length: 1203 }, (_, i) => kinds[i % kinds.length] as Mutation);
  mutations[7] = { type: 'set', family: 'f', column: Buffer.from('big'), value: Buffer.alloc(300_000, 1), timestampMicros: 1000n };
  const tableName = 'projects/p/instances/i/tables/t';

  describe('encodeMutateRow', () => {
    it('encodes a request of many mutations, in pieces, exactly as the client encodes it whole', async () => {
      const key = Buffer.from('row');
      const { requestSerialize } = stub.mutateRow;
      const whole = requestSerialize({ tableName, rowKey: key, mutations: mutations.map(toProtoMutation) });
      const pieces = await encodeMutateRow(requestSerialize, tableName, key, mutations);
      expect(pieces.equals(whole)).to.equal(true);
    });
  });

  describe('encodeMutateRows', () => {
    it('encodes any subset of the entries, a wide one among them, exactly as the client encodes it whole', async () => {
      const entries = [
        { key: Buffer.from('narrow'), mutations: mutations.slice(0, 3) },
        { key: Buffer.from('wide'), mutations },
        { key: Buffer.from('skipped'), mutations: [] },
        { key: Buffer.from('last'), mutations: mutations.slice(5, 6) },
      ];
      const { requestSerialize } = stub.mutateRows;
      for (const indexes of [[0, 1, 3], [3, 1], [1]]) {
        const whole = requestSerialize({
          tableName,
          entries: indexes.map((index) => ({ rowKey: entries[index]?.key, mutations: entries[index]?.mutations.map(toProtoMutation) })),
        });
        expect((await encodeMutateRows(requestSerialize, tableName, entries, indexes)).equals(whole), `entries ${indexes.join(', ')}`).to.equal(true);
      }
    });
  });

  describe('ReadRowsDecoder', () => {
    // A wide row with split values and a reset, then a small row: 5,000 chunks, hundreds of KB.
    const chunks = [
      { rowKey: Buffer.from('a'), familyName: { value: 'f' }, qualifier: { value: Buffer.from('gone') }, timestampMicros: '1000', value: Buffer.from('x') },
      { resetRow: true },
      ...Array.from({ length: 5000 }, (_, i) => ({
        ...(i === 0 ? { rowKey: Buffer.from('a'), familyName: { value: 'f' } } : {}),
        qualifier: { value: Buffer.from(`c${i}`) },
        timestampMicros: String(1000 * (i + 1)),
        value: Buffer.alloc(100, i % 256),
        ...(i % 2 === 0 ? { valueSize: 200 } : {}),
        ...(i % 2 === 0 ? {} : { qualifier: undefined }),
      })),
      { commitRow: true, qualifier: { value: Buffer.from('last') }, value: Buffer.from('y') },
      { rowKey: Buffer.from('b'), familyName: { value: 'g' }, qualifier: { value: Buffer.from('q') }, timestampMicros: '5', value: Buffer.from('z'), commitRow: true },
    ];

    it('decodes a large message in pieces into the rows it decodes in one go', async () => {
      const message = serializeResponse({ chunks, lastScannedRowKey: Buffer.from('b') });
      expect([...fieldPieces(message, 32 * 1024)].length).to.be.greaterThan(10);
      const whole = new ReadRowsDecoder(stub.readRows.responseDeserialize).take(message);
      const inPieces = new ReadRowsDecoder(stub.readRows.responseDeserialize);
      const rows = await inPieces.takeInSlices(message, new Turns());
      inPieces.end();
      expect(rows).to.have.length(2);
      expect(rows[0]?.cells).to.have.length(2501);
      expect(rows).to.deep.equal(whole);
    });

    it('rejects a truncated message', async () => {
      const message = serializeResponse({ chunks });
      const decoder = new ReadRowsDecoder(stub.readRows.responseDeserialize);
      let error: unknown;
      await decoder.takeInSlices(message.subarray(0, message.length - 1), new Turns()).catch((caught: unknown) => (error = caught));
      expect(error).to.be.an('error').with.property('message').match(/truncated/);
    });
  });
});
