import type { Spanner } from '@google-cloud/spanner';

/*
 * The Spanner client serializes a commit's request in one go, on the event loop, which for a wide
 * write is the longest stretch of it (figures: docs/stores/spanner.md). So the store encodes each of a write's mutations itself, with the
 * client's own serializer, as it queues them (a few hundred rows each, paced in slices), and the
 * client's gRPC stub is given a commit method that sends the request as those bytes joined.
 * Protobuf appends the elements of a repeated field that concatenated messages hold, so Spanner
 * receives the same request, and the commit stays one atomic write.
 */

/** A method's request serializer, as grpc-js holds it. */
type Serialize = (request: object) => Buffer;

/** What the store uses of the generated client's gRPC stub. */
interface SpannerStub {
  commit: (request: { session?: unknown; mutations?: readonly object[] }, metadata: unknown, options: unknown, callback: unknown) => unknown;
  makeUnaryRequest(path: string, serialize: (request: EncodedCommit) => Buffer, deserialize: unknown, argument: EncodedCommit, metadata: unknown, options: unknown, callback: unknown): unknown;
  constructor: { service?: { Commit?: { path: string; requestSerialize: Serialize; responseDeserialize: unknown } } };
}

/** Each queued mutation's encoding, as an element of CommitRequest.mutations. */
const encodings = new WeakMap<object, Buffer>();
/** The encoder of each generated client whose stub joins encoded mutations. */
const encoders = new WeakMap<object, Promise<CommitEncoder | undefined>>();

/** Encodes mutations for a stub's commit to join. */
export class CommitEncoder {
  readonly #serialize: Serialize;

  constructor(serialize: Serialize) {
    this.#serialize = serialize;
  }

  /** Encodes a mutation, which must not change afterwards, for the commit that will carry it. */
  encode(mutation: object): void {
    encodings.set(mutation, this.#serialize({ mutations: [mutation] }));
  }
}

/**
 * The encoder for the commits a Spanner client sends, its stub's commit made to join encoded
 * mutations (once per generated client). Undefined when the client is not shaped as this was
 * written for: its commits are then serialized by the client, as before, which is correct, only
 * slower. `unshaped` is then told why, so that the store can say so.
 */
export function commitEncoder(spanner: Spanner, unshaped: (why: string) => void): Promise<CommitEncoder | undefined> {
  const client = (spanner as unknown as { clients_?: Map<string, { initialize?: () => Promise<unknown> }> }).clients_?.get('SpannerClient');
  if (client?.initialize === undefined) {
    unshaped('the Spanner object holds no SpannerClient in clients_');
    return Promise.resolve(undefined);
  }
  let encoder = encoders.get(client);
  if (encoder === undefined) {
    // A client whose stub cannot be had fails its own calls; its commits are left to it.
    encoder = client.initialize().then(
      (stub) => {
        const joined = joinEncodedMutations(stub as SpannerStub);
        if (joined === undefined) unshaped("the SpannerClient's stub lacks commit, makeUnaryRequest or its service's Commit definition");
        return joined;
      },
      () => undefined,
    );
    encoders.set(client, encoder);
  }
  return encoder;
}

/**
 * Gives the stub a commit method that sends a request whose every mutation was encoded
 * beforehand as those encodings joined after the rest of the request; any other request goes as
 * the client would send it.
 */
export function joinEncodedMutations(stub: SpannerStub): CommitEncoder | undefined {
  const definition = stub.constructor.service?.Commit;
  const clientCommit = stub.commit as SpannerStub['commit'] | undefined;
  if (definition === undefined || typeof clientCommit !== 'function' || typeof stub.makeUnaryRequest !== 'function') return undefined;
  const { path, requestSerialize, responseDeserialize } = definition;
  stub.commit = function commit(request, metadata, options, callback) {
    const mutations = request.mutations ?? [];
    const pieces = mutations.map((mutation) => encodings.get(mutation));
    if (mutations.length === 0 || pieces.includes(undefined)) return clientCommit.call(this, request, metadata, options, callback);
    const bytes = Buffer.concat([requestSerialize({ ...request, mutations: [] }), ...(pieces as Buffer[])]);
    // The session stays beside the bytes: the client's channel pool picks the session's channel from it.
    const encoded: EncodedCommit = { session: request.session, bytes };
    return this.makeUnaryRequest(path, bytesOf, responseDeserialize, encoded, metadata, options, callback);
  };
  return new CommitEncoder(requestSerialize);
}

interface EncodedCommit {
  readonly session: unknown;
  readonly bytes: Buffer;
}

function bytesOf(request: EncodedCommit): Buffer {
  return request.bytes;
}
