import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { protos } from '@google-cloud/bigtable';
import { Client, Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData, credentials } from '@grpc/grpc-js';
import { expect } from 'chai';
import { BigtableStore } from '../../../src/store/bigtable/bigtable-store.ts';
import { BIGTABLE_LIMITS } from '../../../src/store/bigtable/limits.ts';
import { emulatorHost } from '../../support/emulator.ts';
import { TEST_PROJECT, randomInstanceId } from '../../support/test-app.ts';

// The message classes the Bigtable client itself uses (see bigtable-front.ts).
const requireFromClient = createRequire(import.meta.resolve('@google-cloud/bigtable'));
const { protos: messages } = requireFromClient('@google-cloud/bigtable-api') as { protos: typeof protos };
const { CreateTableRequest, GetTableRequest, Table } = messages.google.bigtable.admin.v2;

const ADMIN = '/google.bigtable.admin.v2.BigtableTableAdmin/';
const same = (bytes: Buffer) => bytes;

/** A gRPC server in front of the emulator for the table admin's CreateTable: it keeps each request, decoded, and passes it on. */
class CreateTableRecorder {
  readonly requests: protos.google.bigtable.admin.v2.CreateTableRequest[] = [];
  readonly #server = new Server();
  readonly #upstream: Client;
  #port = 0;

  private constructor(target: string) {
    this.#upstream = new Client(target, credentials.createInsecure());
  }

  static async start(target: string): Promise<CreateTableRecorder> {
    const recorder = new CreateTableRecorder(target);
    const path = `${ADMIN}CreateTable`;
    recorder.#server.addService(
      { CreateTable: { path, requestStream: false, responseStream: false, requestSerialize: same, requestDeserialize: same, responseSerialize: same, responseDeserialize: same } },
      {
        CreateTable: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
          recorder.requests.push(CreateTableRequest.decode(call.request));
          recorder.#upstream.makeUnaryRequest(path, same, same, call.request, call.metadata, (error, response) => callback(error, response));
        },
      },
    );
    recorder.#port = await new Promise<number>((resolve, reject) =>
      recorder.#server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))),
    );
    return recorder;
  }

  get host(): string {
    return `127.0.0.1:${this.#port}`;
  }

  close(): void {
    this.#upstream.close();
    this.#server.forceShutdown();
  }
}

/**
 * A table the Bigtable store creates gets a change stream, kept for the store's published
 * `changeRetentionSeconds`. The emulator accepts a CreateTable with a change_stream_config and
 * keeps nothing of it (its GetTable answers none), and a store opened with `emulatorHost` leaves
 * the config out; so this test opens the store as it is opened for Bigtable itself (no
 * `emulatorHost`) and checks what it sends, through a recorder in front of the emulator. The
 * client library is pointed at the recorder by BIGTABLE_EMULATOR_HOST, set only while the store
 * is constructed (the library reads it then), which also gives plain-text credentials; a
 * throwaway service account key makes the library's credential lookup local, and no token is
 * fetched with plain-text credentials.
 */
describe('bigtable store: tables created with a change stream', function () {
  this.timeout(30_000);
  let emulator: string;
  let recorder: CreateTableRecorder;
  let directory: string;
  let keyFile: string;
  const stores: BigtableStore[] = [];
  const options = () => ({ deadline: Date.now() + 10_000 });

  before(async function () {
    emulator = emulatorHost(this);
    recorder = await CreateTableRecorder.start(emulator);
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-bigtable-key-'));
    keyFile = join(directory, 'key.json');
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(
      keyFile,
      JSON.stringify({
        type: 'service_account',
        project_id: TEST_PROJECT,
        private_key_id: 'test',
        private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
        client_email: `test@${TEST_PROJECT}.iam.gserviceaccount.com`,
        client_id: '1',
        // Never called (see above); were it, it would be refused on this machine.
        token_uri: 'http://127.0.0.1:9/token',
      }),
    );
  });
  after(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
    recorder?.close();
    if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
  });

  /** The store as opened for Bigtable itself, its calls going to the recorder. */
  function productionStore(instance: string): BigtableStore {
    const saved = process.env['BIGTABLE_EMULATOR_HOST'];
    process.env['BIGTABLE_EMULATOR_HOST'] = recorder.host;
    try {
      const store = new BigtableStore({ projectId: TEST_PROJECT, instanceIds: [instance], credentialsFile: keyFile });
      stores.push(store);
      return store;
    } finally {
      if (saved === undefined) delete process.env['BIGTABLE_EMULATOR_HOST'];
      else process.env['BIGTABLE_EMULATOR_HOST'] = saved;
    }
  }

  it('sends CreateTable with change_stream_config retention = limits.changeRetentionSeconds, and publishes changeFeed', async () => {
    const instance = randomInstanceId();
    const store = productionStore(instance);
    expect(store.capabilities.changeFeed).to.equal(true);
    await store.createTable({ instance, table: 'followed' }, [{ name: 'cf', maxVersions: 1 }, { name: 'meta' }], options());

    const request = recorder.requests.find((each) => each.tableId === 'followed');
    expect(request?.parent).to.equal(`projects/${TEST_PROJECT}/instances/${instance}`);
    expect(Number(request?.table?.changeStreamConfig?.retentionPeriod?.seconds)).to.equal(BIGTABLE_LIMITS.changeRetentionSeconds);
    expect(BIGTABLE_LIMITS.changeRetentionSeconds).to.equal(86_400);
    expect(Object.keys(request?.table?.columnFamilies ?? {}).sort()).to.deep.equal(['cf', 'meta']);
    // The emulator took it: the table is there, without the config, which it does not keep.
    const table = await getTable(`${request?.parent}/tables/followed`);
    expect(Object.keys(table.columnFamilies ?? {}).sort()).to.deep.equal(['cf', 'meta']);
    expect(table.changeStreamConfig ?? null).to.equal(null);
  });

  it('leaves it out on the emulator, where the store publishes no changeFeed', async () => {
    const instance = randomInstanceId();
    const store = new BigtableStore({ projectId: TEST_PROJECT, instanceIds: [instance], emulatorHost: recorder.host });
    stores.push(store);
    expect(store.capabilities.changeFeed).to.equal(false);
    await store.createTable({ instance, table: 'plain' }, [{ name: 'cf' }], options());
    const request = recorder.requests.find((each) => each.tableId === 'plain' && each.parent.endsWith(`/${instance}`));
    expect(request?.table?.columnFamilies?.['cf']).to.not.equal(undefined);
    expect(request?.table?.changeStreamConfig ?? null).to.equal(null);
  });

  /** GetTable (view FULL) straight from the emulator. */
  function getTable(name: string): Promise<protos.google.bigtable.admin.v2.Table> {
    const client = new Client(emulator, credentials.createInsecure());
    const request = Buffer.from(GetTableRequest.encode({ name, view: messages.google.bigtable.admin.v2.Table.View.FULL }).finish());
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(`${ADMIN}GetTable`, same, same, request, (error, response) => {
        client.close();
        if (error || response === undefined) reject(error ?? new Error('no answer'));
        else resolve(Table.decode(response));
      });
    });
  }
});
