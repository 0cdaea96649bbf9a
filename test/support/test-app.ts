import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from '../../src/app.ts';
import { BigtableStore } from '../../src/store/bigtable/bigtable-store.ts';
import type { DataStore } from '../../src/store/store.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { ApiClient } from './api-client.ts';
import { emulatorHost } from './emulator.ts';

export const TEST_PROJECT = 'kvcrud-test';

export interface TestAppOptions {
  /** host:port of the Bigtable emulator (or of anything else posing as one). */
  readonly emulatorHost: string;
  /** How many instances to serve; each gets a fresh random ID, so suites never share data. */
  readonly instanceCount?: number;
  readonly maxBodyBytes?: number;
  readonly storeTimeoutMs?: number;
  /** Wraps the real store, to inject a fault that cannot be caused for real. */
  readonly wrapStore?: (store: DataStore) => DataStore;
}

export interface TestApp {
  readonly api: ApiClient;
  readonly baseUrl: string;
  /** The served instance IDs; `instance` is the first. */
  readonly instances: readonly string[];
  readonly instance: string;
  /** Log lines (parsed JSON) the app wrote. */
  readonly logs: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export function randomInstanceId(): string {
  return `inst-${randomBytes(4).toString('hex')}`;
}

/** Starts the real app in this process on a free port, with the Bigtable store on the emulator. */
export async function startTestApp(options: TestAppOptions): Promise<TestApp> {
  const instances = Array.from({ length: options.instanceCount ?? 1 }, randomInstanceId);
  const logs: Array<Record<string, unknown>> = [];
  const logger = createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const bigtable = new BigtableStore({ projectId: TEST_PROJECT, instanceIds: instances, emulatorHost: options.emulatorHost });
  const store = options.wrapStore ? options.wrapStore(bigtable) : bigtable;
  const app = createApp({
    config: {
      instanceIds: instances,
      maxBodyBytes: options.maxBodyBytes ?? 10 * 1024 * 1024,
      storeTimeoutMs: options.storeTimeoutMs ?? 5000,
    },
    store,
    logger,
  });
  const server: Server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    api: await ApiClient.connect(baseUrl),
    baseUrl,
    instances,
    instance: instances[0] ?? '',
    logs,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await store.close();
    },
  };
}

/**
 * useTestApp starts a TestApp before the suite's tests (skipping them when there is no emulator)
 * and closes it after. Returns an accessor for the tests.
 */
export function useTestApp(options: Omit<TestAppOptions, 'emulatorHost'> = {}): () => TestApp {
  let app: TestApp | undefined;
  before(async function () {
    app = await startTestApp({ emulatorHost: emulatorHost(this), ...options });
  });
  after(async () => {
    await app?.close();
  });
  return () => {
    if (app === undefined) throw new Error('the test app was not started');
    return app;
  };
}
