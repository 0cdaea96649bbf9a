import { createRequire } from 'node:module';
import type { protos } from '@google-cloud/bigtable';
import {
  Client,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type UntypedServiceImplementation,
  credentials,
  type sendUnaryData,
} from '@grpc/grpc-js';
import type { ChangeStreamStandIn } from './change-stream-stand-in.ts';

// The message classes the Bigtable client itself uses (see bigtable-front.ts).
const requireFromClient = createRequire(import.meta.resolve('@google-cloud/bigtable'));
const { protos: messages } = requireFromClient('@google-cloud/bigtable-api') as { protos: typeof protos };
const v2 = messages.google.bigtable.v2;
const admin = messages.google.bigtable.admin.v2;

const DATA = '/google.bigtable.v2.Bigtable/';
const ADMIN = '/google.bigtable.admin.v2.BigtableTableAdmin/';
const STREAMING = new Set([`${DATA}ReadRows`, `${DATA}MutateRows`]);
const PATHS = [
  ...STREAMING,
  ...['MutateRow', 'CheckAndMutateRow', 'ReadModifyWriteRow', 'PingAndWarm'].map((name) => DATA + name),
  ...['CreateTable', 'GetTable', 'ListTables', 'DeleteTable'].map((name) => ADMIN + name),
];

/**
 * RecordingFront is a gRPC server in front of a Bigtable emulator that passes every call through
 * as bytes and, as Bigtable's change stream would, records each write the emulator committed into
 * a ChangeStreamStandIn: a MutateRow, each MutateRows entry that succeeded, the branch a
 * CheckAndMutateRow applied (none when it is empty), the cells a ReadModifyWriteRow answered.
 * Tables created and deleted through it are created and deleted in the stand-in too. Writes go
 * to the emulator one at a time, so the order they are recorded in is the order they committed.
 *
 * With it, the driver conformance suite's feed cases run through the store: data calls reach the
 * emulator, change stream calls the stand-in. What it checks is the store's side (the mapping of
 * changes, positions, resumption, the end of a deleted table's feed); that Bigtable records
 * every write in its change stream is Bigtable's documented behaviour, modelled here.
 */
export class RecordingFront {
  // A row may be far larger than gRPC's default 4 MB message bound.
  readonly #server = new Server(UNBOUNDED);
  readonly #upstream: Client;
  readonly #standIn: ChangeStreamStandIn;
  /** The write in flight: the next one waits for it. */
  #writing: Promise<unknown> = Promise.resolve();
  #port = 0;

  private constructor(target: string, standIn: ChangeStreamStandIn) {
    this.#upstream = new Client(target, credentials.createInsecure(), UNBOUNDED);
    this.#standIn = standIn;
  }

  /** Starts a front on a free port for the emulator at `target` (host:port), recording into `standIn`. */
  static async start(target: string, standIn: ChangeStreamStandIn): Promise<RecordingFront> {
    const front = new RecordingFront(target, standIn);
    front.#server.addService(SERVICE, front.#handlers());
    front.#port = await new Promise<number>((resolve, reject) =>
      front.#server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))),
    );
    return front;
  }

  /** host:port for the store's emulatorHost. */
  get host(): string {
    return `127.0.0.1:${this.#port}`;
  }

  async close(): Promise<void> {
    this.#upstream.close();
    this.#server.forceShutdown();
    return Promise.resolve();
  }

  #handlers(): UntypedServiceImplementation {
    const handlers: UntypedServiceImplementation = {};
    for (const path of PATHS) {
      handlers[path] = STREAMING.has(path)
        ? (call: ServerWritableStream<Buffer, Buffer>) => {
            if (path.endsWith('MutateRows')) this.#serially(() => this.#mutateRows(call));
            else void this.#forwardStream(path, call, () => undefined);
          }
        : (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
            const forward = () =>
              new Promise<void>((resolve) => {
                this.#upstream.makeUnaryRequest(path, same, same, call.request, call.metadata, (error, response) => {
                  if (!error && response !== undefined) this.#record(path, call.request, response);
                  callback(error, response);
                  resolve();
                });
              });
            if (isWrite(path)) this.#serially(forward);
            else void forward();
          };
    }
    return handlers;
  }

  #serially(write: () => Promise<void>): void {
    this.#writing = this.#writing.then(write, write);
  }

  #forwardStream(path: string, call: ServerWritableStream<Buffer, Buffer>, onResponse: (response: Buffer) => void): Promise<void> {
    return new Promise((resolve) => {
      const upstream = this.#upstream.makeServerStreamRequest(path, same, same, call.request, call.metadata);
      call.on('cancelled', () => upstream.cancel());
      upstream.on('data', (response: Buffer) => {
        onResponse(response);
        call.write(response);
      });
      upstream.on('error', (error) => {
        call.emit('error', error);
        resolve();
      });
      upstream.on('end', () => {
        call.end();
        resolve();
      });
    });
  }

  async #mutateRows(call: ServerWritableStream<Buffer, Buffer>): Promise<void> {
    const request = v2.MutateRowsRequest.decode(call.request);
    await this.#forwardStream(`${DATA}MutateRows`, call, (message) => {
      for (const entry of v2.MutateRowsResponse.decode(message).entries) {
        const applied = request.entries[Number(entry.index)];
        if ((entry.status?.code ?? 0) === 0 && applied !== undefined) this.#write(request.tableName, applied.rowKey, applied.mutations);
      }
    });
  }

  #record(path: string, requestBytes: Buffer, responseBytes: Buffer): void {
    switch (path.slice(path.lastIndexOf('/') + 1)) {
      case 'MutateRow': {
        const request = v2.MutateRowRequest.decode(requestBytes);
        this.#write(request.tableName, request.rowKey, request.mutations);
        break;
      }
      case 'CheckAndMutateRow': {
        const request = v2.CheckAndMutateRowRequest.decode(requestBytes);
        const matched = v2.CheckAndMutateRowResponse.decode(responseBytes).predicateMatched;
        this.#write(request.tableName, request.rowKey, matched ? request.trueMutations : request.falseMutations);
        break;
      }
      case 'ReadModifyWriteRow': {
        const request = v2.ReadModifyWriteRowRequest.decode(requestBytes);
        const row = v2.ReadModifyWriteRowResponse.decode(responseBytes).row;
        const sets = (row?.families ?? []).flatMap((family) =>
          (family.columns ?? []).flatMap((column) =>
            (column.cells ?? []).map((cell) => ({ setCell: { familyName: family.name ?? null, columnQualifier: column.qualifier ?? null, timestampMicros: cell.timestampMicros ?? null, value: cell.value ?? null } })),
          ),
        );
        this.#write(request.tableName, request.rowKey, sets);
        break;
      }
      case 'CreateTable': {
        const request = admin.CreateTableRequest.decode(requestBytes);
        this.#standIn.createTable(`${request.parent}/tables/${request.tableId}`, [Buffer.from('m')]);
        break;
      }
      case 'DeleteTable':
        this.#standIn.deleteTable(admin.DeleteTableRequest.decode(requestBytes).name);
        break;
    }
  }

  #write(tableName: string, key: Uint8Array | string | null | undefined, mutations: readonly protos.google.bigtable.v2.IMutation[] | null | undefined): void {
    // A table the front did not see created (the stand-in does not know it) has no change stream.
    if (mutations === null || mutations === undefined || mutations.length === 0 || !this.#standIn.hasTable(tableName)) return;
    this.#standIn.write(tableName, Buffer.from(key ?? Buffer.alloc(0)), mutations);
  }
}

function isWrite(path: string): boolean {
  return ['MutateRow', 'CheckAndMutateRow', 'ReadModifyWriteRow'].some((name) => path === DATA + name);
}

const same = (message: Buffer) => message;

const UNBOUNDED = { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 };

const SERVICE: ServiceDefinition = Object.fromEntries(
  PATHS.map((path) => [
    path,
    { path, requestStream: false, responseStream: STREAMING.has(path), requestSerialize: same, requestDeserialize: same, responseSerialize: same, responseDeserialize: same },
  ]),
);
