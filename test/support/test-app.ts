import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from '../../src/app.ts';
import { DrainState } from '../../src/http/admission/drain-state.ts';
import { type Authenticator, openAuthenticator } from '../../src/auth/authenticator.ts';
import type { OidcTiming } from '../../src/auth/oidc.ts';
import type { AuthConfig } from '../../src/config.ts';
import { type ServerLimits, createHttpServer } from '../../src/http/server/http-server.ts';
import type { AnswerBudget } from '../../src/service/answer-budget.ts';
import { BigtableStore } from '../../src/store/bigtable/bigtable-store.ts';
import type { DataStore } from '../../src/store/store.ts';
import { type StoreSet, createStoreSet } from '../../src/store/store-set.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { accessFileChecks, createMetrics } from '../../src/telemetry/metrics.ts';
import { ApiClient } from './api-client.ts';
import type { DriverHarness, DriverHarnessFactory, HarnessTraits } from './driver-harness.ts';
import { TEST_PROJECT } from './emulator.ts';
import { harness as embeddedHarness } from './harnesses/embedded.ts';

export { TEST_PROJECT };

export interface TestAppOptions {
  /** The store to serve, from a driver harness, and its driver's name; without it, Bigtable on `emulatorHost`. */
  readonly harness?: { readonly driver: string; readonly harness: DriverHarness };
  /** host:port of the Bigtable emulator (or of anything else posing as one), without a harness. */
  readonly emulatorHost?: string;
  /** How many instances to serve; each gets a fresh random ID, so suites never share data. */
  readonly instanceCount?: number;
  /** The instance IDs to serve instead (to share a store's data with another app). */
  readonly instances?: readonly string[];
  readonly maxBodyBytes?: number;
  readonly storeTimeoutMs?: number;
  readonly maxInflight?: number;
  /** MAX_INFLIGHT_PER_CALLER; maxInflight when left out (not the service's default, half of it). */
  readonly maxInflightPerCaller?: number;
  readonly maxInflightUnauthenticated?: number;
  /** MIN_BODY_BYTES_PER_SECOND; the service's default (16 KiB/s) when left out. */
  readonly minBodyBytesPerSecond?: number;
  readonly rateLimitPerSecond?: number;
  /** TRUSTED_PROXIES; none when left out. */
  readonly trustedProxies?: readonly string[];
  /** V1_MAX_VERSIONS; the service's default (1) when left out. */
  readonly v1MaxVersions?: number;
  /** Shorter server timeouts, for tests of slow clients. */
  readonly serverLimits?: Partial<ServerLimits>;
  /** The bytes of rows answers may hold at once; the service's own, sized from the heap, when left out. */
  readonly answerBudget?: AnswerBudget;
  /** Wraps the real store, to inject a fault that cannot be caused for real. */
  readonly wrapStore?: (store: DataStore) => DataStore;
  /** FEEDS_MAX and FEEDS_MAX_PER_CALLER; the service's defaults when left out. */
  readonly feeds?: { readonly max?: number; readonly perCaller?: number };
  /**
   * Turns authentication on. Called with the served instances and the store's name (grants name
   * them) before the app starts; without it every caller is admin (AUTH_MODE none).
   */
  readonly auth?: (instances: readonly string[], store: string) => TestAuth;
}

export interface TestAuth {
  readonly config: AuthConfig;
  /** How often the keys and grants files are read again (the service's default is 2 s). */
  readonly reloadIntervalMs?: number;
  readonly oidcTiming?: OidcTiming;
  /** Headers that fetch /openapi.json for the ApiClient when AUTH_PROTECT_DOCS is on. */
  readonly docsHeaders?: Record<string, string>;
}

export interface TestApp {
  readonly api: ApiClient;
  readonly baseUrl: string;
  /** The served instance IDs; `instance` is the first. */
  readonly instances: readonly string[];
  readonly instance: string;
  /** The store behind the app, for arranging what the v1 API cannot (e.g. a second family). */
  readonly store: DataStore;
  /** Its name in the app's StoreSet (and in metric labels): its driver's, as for the store the v1 variables define. */
  readonly storeName: string;
  /** What the store's harness says it can do in test time (Bigtable's when no harness was given). */
  readonly traits: Pick<HarnessTraits, 'fastWideWrites'>;
  /** Log lines (parsed JSON) the app wrote. */
  readonly logs: Array<Record<string, unknown>>;
  /** The app's drain: start() it to see what SIGTERM does to open feeds and requests. */
  readonly drain: DrainState;
  close(): Promise<void>;
}

export function randomInstanceId(): string {
  return `inst-${randomBytes(4).toString('hex')}`;
}

/** Starts the real app in this process on a free port, with a fresh store. */
export async function startTestApp(options: TestAppOptions): Promise<TestApp> {
  const instances = options.instances ?? Array.from({ length: options.instanceCount ?? 1 }, randomInstanceId);
  const logs: Array<Record<string, unknown>> = [];
  const logger = createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const real = options.harness
    ? await options.harness.harness.open(instances)
    : new BigtableStore({ projectId: TEST_PROJECT, instanceIds: instances, emulatorHost: options.emulatorHost ?? '' });
  const store = options.wrapStore ? options.wrapStore(real) : real;
  const storeName = options.harness?.driver ?? 'bigtable';
  const stores: StoreSet = createStoreSet([{ name: storeName, driver: storeName, instances, store }], storeName);
  const auth = options.auth?.(instances, storeName);
  const metrics = createMetrics();
  const drain = new DrainState();
  let authenticator: Authenticator | undefined;
  if (auth !== undefined) {
    authenticator = openAuthenticator(auth.config, {
      logger,
      stores,
      onFileCheck: accessFileChecks(metrics),
      ...(auth.reloadIntervalMs === undefined ? {} : { reloadIntervalMs: auth.reloadIntervalMs }),
      ...(auth.oidcTiming === undefined ? {} : { oidcTiming: auth.oidcTiming }),
    });
  }
  const app = createApp({
    config: {
      maxBodyBytes: options.maxBodyBytes ?? 10 * 1024 * 1024,
      storeTimeoutMs: options.storeTimeoutMs ?? 5000,
      maxInflight: options.maxInflight ?? 256,
      // The tests are one client: unless a test sets a share per caller, it may take every slot.
      maxInflightPerCaller: options.maxInflightPerCaller ?? options.maxInflight ?? 256,
      ...(options.maxInflightUnauthenticated === undefined ? {} : { maxInflightUnauthenticated: options.maxInflightUnauthenticated }),
      ...(options.minBodyBytesPerSecond === undefined ? {} : { minBodyBytesPerSecond: options.minBodyBytesPerSecond }),
      rateLimitPerSecond: options.rateLimitPerSecond,
      ...(options.trustedProxies === undefined ? {} : { trustedProxies: options.trustedProxies }),
      ...(options.v1MaxVersions === undefined ? {} : { v1MaxVersions: options.v1MaxVersions }),
      ...(options.feeds?.max === undefined ? {} : { feedsMax: options.feeds.max }),
      ...(options.feeds?.perCaller === undefined ? {} : { feedsMaxPerCaller: options.feeds.perCaller }),
    },
    drain,
    stores,
    logger,
    metrics,
    ...(authenticator === undefined ? {} : { auth: { authenticator, protectDocs: auth?.config.protectDocs ?? false } }),
    ...(options.answerBudget === undefined ? {} : { answerBudget: options.answerBudget }),
  });
  const server: Server = await new Promise((resolve) => {
    const listening = createHttpServer(app, options.serverLimits, logger).listen(0, '127.0.0.1', () => resolve(listening));
  });
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    api: await ApiClient.connect(baseUrl, auth?.docsHeaders),
    baseUrl,
    instances,
    instance: instances[0] ?? '',
    store: real,
    storeName,
    traits: { fastWideWrites: options.harness?.harness.traits.fastWideWrites ?? false },
    logs,
    drain,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      authenticator?.close();
      await (options.harness === undefined ? store.close() : options.harness.harness.close(real));
    },
  };
}

/**
 * useTestApp starts a TestApp before the suite's tests and closes it after; `store` picks the
 * adapter: the embedded store by default, so that suites that do not depend on the store never
 * skip; the others (test/support/harnesses/) are skipped when their backend is missing. Returns an accessor for
 * the tests.
 */
export function useTestApp(
  options: Omit<TestAppOptions, 'emulatorHost' | 'harness'> & { readonly store?: DriverHarnessFactory } = {},
): () => TestApp {
  let app: TestApp | undefined;
  before(async function () {
    const { store = embeddedHarness, ...rest } = options;
    app = await startTestApp({ ...rest, harness: { driver: store.driver, harness: await store.make(this) } });
  });
  after(async () => {
    await app?.close();
  });
  return () => {
    if (app === undefined) throw new Error('the test app was not started');
    return app;
  };
}
