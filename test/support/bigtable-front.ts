import { createRequire } from 'node:module';
import type { protos } from '@google-cloud/bigtable';
import {
  Client,
  Metadata,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type sendUnaryData,
  type ServerWritableStream,
  type ServiceDefinition,
  type UntypedServiceImplementation,
  credentials,
  status,
} from '@grpc/grpc-js';

// The message classes the Bigtable client itself uses, from the package it depends on: its own
// main module does not export them at run time.
const requireFromClient = createRequire(import.meta.resolve('@google-cloud/bigtable'));
const { protos: messages } = requireFromClient('@google-cloud/bigtable-api') as { protos: typeof protos };
const { MutateRowsRequest, MutateRowsResponse, ReadRowsResponse } = messages.google.bigtable.v2;

/** A status the front answers for one MutateRows entry instead of passing it on. */
export interface EntryFault {
  readonly code: status;
  readonly message: string;
}

/**
 * BigtableFront is a gRPC server in front of a real Bigtable emulator, for the faults the emulator
 * cannot produce: a MutateRows entry failing transiently on its own, a ReadRows stream breaking
 * half-way. Everything else is passed through as bytes, untouched; what the front does is
 * recorded for the test to check (which entries each MutateRows call carried, whether a ReadRows
 * call was cancelled by the client).
 */
export class BigtableFront {
  /**
   * Decides, per MutateRows call (numbered from 0) and entry, whether the front fails the entry
   * itself; entries it does not fail go to the emulator. By default none is failed.
   */
  failEntry: (call: number, key: Buffer) => EntryFault | undefined = () => undefined;
  /** When set, the next ReadRows call ends with UNAVAILABLE once this many rows have gone through. */
  breakReadAfterRows: number | undefined;
  /** The row keys of each MutateRows call, in call order. */
  readonly mutateRowsCalls: Buffer[][] = [];
  /** How many ReadRows calls the client cancelled. */
  readRowsCancelled = 0;
  /** How many ReadRows calls reached the front. */
  readRowsCalls = 0;
  /** How many calls of each method (its last path segment: GetTable, MutateRow, …) reached the front. */
  readonly calls = new Map<string, number>();

  readonly #server = new Server();
  readonly #upstream: Client;
  #port = 0;

  private constructor(target: string) {
    this.#upstream = new Client(target, credentials.createInsecure());
  }

  /** Starts a front on a free port that passes calls to the emulator at `target` (host:port). */
  static async start(target: string): Promise<BigtableFront> {
    const front = new BigtableFront(target);
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
    for (const [name, method] of Object.entries(SERVICE)) {
      const count = () => {
        const methodName = method.path.slice(method.path.lastIndexOf('/') + 1);
        this.calls.set(methodName, (this.calls.get(methodName) ?? 0) + 1);
      };
      handlers[name] = method.responseStream
        ? (call: ServerWritableStream<Buffer, Buffer>) => {
            count();
            this.#stream(method.path, call);
          }
        : (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
            count();
            this.#upstream.makeUnaryRequest(method.path, same, same, call.request, call.metadata, (error, response) => callback(error, response));
          };
    }
    return handlers;
  }

  #stream(path: string, call: ServerWritableStream<Buffer, Buffer>): void {
    if (path === READ_ROWS) {
      this.readRowsCalls += 1;
      call.on('cancelled', () => (this.readRowsCancelled += 1));
      const breakAfter = this.breakReadAfterRows;
      this.breakReadAfterRows = undefined;
      let rows = 0;
      this.#forward(path, call.request, call, (response) => {
        rows += (ReadRowsResponse.decode(response).chunks ?? []).filter((chunk) => chunk.commitRow).length;
        return breakAfter !== undefined && rows >= breakAfter;
      });
      return;
    }
    if (path === MUTATE_ROWS) {
      this.#mutateRows(call);
      return;
    }
    this.#forward(path, call.request, call);
  }

  /** Fails the entries failEntry picks, passes the others on, and answers with the original indexes. */
  #mutateRows(call: ServerWritableStream<Buffer, Buffer>): void {
    const request = MutateRowsRequest.decode(call.request);
    const entries = request.entries ?? [];
    const number = this.mutateRowsCalls.length;
    this.mutateRowsCalls.push(entries.map((entry) => Buffer.from(entry.rowKey ?? [])));
    const passed: number[] = [];
    const failed: protos.google.bigtable.v2.MutateRowsResponse.IEntry[] = [];
    entries.forEach((entry, index) => {
      const fault = this.failEntry(number, Buffer.from(entry.rowKey ?? []));
      if (fault === undefined) passed.push(index);
      else failed.push({ index, status: { code: fault.code, message: fault.message } });
    });
    if (failed.length > 0) call.write(Buffer.from(MutateRowsResponse.encode({ entries: failed }).finish()));
    if (passed.length === 0) {
      call.end();
      return;
    }
    const upstreamRequest = Buffer.from(MutateRowsRequest.encode({ ...request, entries: passed.map((index) => entries[index] as object) }).finish());
    const upstream = this.#upstream.makeServerStreamRequest(MUTATE_ROWS, same, same, upstreamRequest, call.metadata);
    upstream.on('data', (response: Buffer) => {
      const decoded = MutateRowsResponse.decode(response);
      const remapped = (decoded.entries ?? []).map((entry) => ({ ...entry, index: passed[Number(entry.index)] ?? -1 }));
      call.write(Buffer.from(MutateRowsResponse.encode({ entries: remapped }).finish()));
    });
    upstream.on('error', (error) => call.emit('error', error));
    upstream.on('end', () => call.end());
  }

  /** Passes a server-streaming call on; `stop` may end it with UNAVAILABLE after a response. */
  #forward(path: string, request: Buffer, call: ServerWritableStream<Buffer, Buffer>, stop?: (response: Buffer) => boolean): void {
    const upstream = this.#upstream.makeServerStreamRequest(path, same, same, request, call.metadata);
    call.on('cancelled', () => upstream.cancel());
    upstream.on('data', (response: Buffer) => {
      call.write(response);
      if (stop?.(response) === true) {
        upstream.cancel();
        upstream.removeAllListeners('error').on('error', () => {});
        upstream.removeAllListeners('end');
        call.emit('error', { code: status.UNAVAILABLE, details: 'the front broke the stream', metadata: new Metadata() });
      }
    });
    upstream.on('error', (error) => call.emit('error', error));
    upstream.on('end', () => call.end());
  }
}

const same = (bytes: Buffer) => bytes;

const READ_ROWS = '/google.bigtable.v2.Bigtable/ReadRows';
const MUTATE_ROWS = '/google.bigtable.v2.Bigtable/MutateRows';

/** Every method the store calls, as raw bytes both ways. */
const SERVICE: ServiceDefinition = Object.fromEntries(
  [
    [READ_ROWS, true],
    [MUTATE_ROWS, true],
    ['/google.bigtable.v2.Bigtable/MutateRow', false],
    ['/google.bigtable.v2.Bigtable/PingAndWarm', false],
    ['/google.bigtable.admin.v2.BigtableTableAdmin/CreateTable', false],
    ['/google.bigtable.admin.v2.BigtableTableAdmin/GetTable', false],
    ['/google.bigtable.admin.v2.BigtableTableAdmin/ListTables', false],
    ['/google.bigtable.admin.v2.BigtableTableAdmin/DeleteTable', false],
  ].map(([path, responseStream]) => [
    path as string,
    {
      path: path as string,
      requestStream: false,
      responseStream: responseStream as boolean,
      requestSerialize: same,
      requestDeserialize: same,
      responseSerialize: same,
      responseDeserialize: same,
    },
  ]),
);
