import { type AddressInfo, type Socket, createConnection, createServer } from 'node:net';

/**
 * SlowProxy is a TCP proxy in front of a real backend (the Bigtable emulator) that can hold back
 * what the backend sends: with `delayMs` above 0, each chunk reaches the client that much later,
 * in order. Calls through it are then genuinely slow while everything else stays real.
 */
export class SlowProxy {
  /** How long each chunk from the backend is held back; may be changed at any time. */
  delayMs = 0;
  readonly #server = createServer((client) => this.#forward(client));
  readonly #sockets = new Set<Socket>();
  readonly #target: { host: string; port: number };

  constructor(target: string) {
    const at = target.lastIndexOf(':');
    this.#target = { host: target.slice(0, at), port: Number(target.slice(at + 1)) };
  }

  /** Starts a proxy on a free port that forwards to `target` (host:port). */
  static async start(target: string): Promise<SlowProxy> {
    const proxy = new SlowProxy(target);
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  /** host:port to connect to instead of the backend. */
  get host(): string {
    return `127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  #forward(client: Socket): void {
    const backend = createConnection(this.#target);
    for (const socket of [client, backend]) {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        backend.destroy();
      });
    }
    client.on('close', () => backend.destroy());
    client.pipe(backend);
    // Each chunk is due delayMs after it arrived, and never before the chunk ahead of it.
    let lastDue = 0;
    backend.on('data', (chunk: Buffer) => {
      lastDue = Math.max(Date.now() + this.delayMs, lastDue);
      setTimeout(() => client.destroyed || client.write(chunk), lastDue - Date.now());
    });
    backend.on('end', () => setTimeout(() => client.end(), Math.max(0, lastDue - Date.now())));
  }
}
