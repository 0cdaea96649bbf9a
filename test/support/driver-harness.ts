import { randomBytes } from 'node:crypto';
import type { DataStore } from '../../src/store/store.ts';

/**
 * DriverHarness is all a store driver supplies to the driver conformance suite
 * (test/conformance/driver), in the style of gocloud.dev's drivertest: a way to open a fresh
 * store, a way to close it, and what the store can do in test time. Everything the suite
 * asserts comes from the DataStore contract (src/store/store.ts) and the capabilities and limits
 * the opened store publishes; nothing in a harness changes what a case expects.
 */
export interface DriverHarness {
  /** What the store can do in test time: lets a case choose a cheaper way to the same assertion. */
  readonly traits: HarnessTraits;
  /**
   * Opens a store serving exactly `instances`, holding nothing another test made and sharing
   * nothing with other open stores (its own temporary directory, fresh instances or namespace).
   */
  open(instances: readonly string[]): Promise<DataStore>;
  /** Closes a store this harness opened and removes whatever the harness made for it. */
  close(store: DataStore): Promise<void>;
}

/**
 * What a store can do in test time. Traits never excuse a difference in behaviour: they only
 * size the work a case does (how many random runs, whether one write of the widest row the
 * limits allow fits in a test's time).
 */
export interface HarnessTraits {
  /** Applies one mutateRow of `limits.mutationsPerRow` cells within seconds. */
  readonly fastWideWrites: boolean;
  /** Random sequences per property of the model-based test: more for fast stores, fewer for emulators. */
  readonly propertyRuns: number;
}

/**
 * DriverHarnessFactory names a driver and makes its harness. `make` runs in a mocha hook: when
 * the backend is missing (no emulator, no server binary) it skips the calling suite, loudly, via
 * `missingBackend`; under CI=true a missing backend fails instead.
 */
export interface DriverHarnessFactory {
  /** The driver's name, as in src/store/drivers.ts (`bigtable`, `embedded`, …). */
  readonly driver: string;
  make(context: Mocha.Context): Promise<DriverHarness>;
  /**
   * Stops what `make` started to serve every suite of the run (a server, an emulator), once the
   * driver's suite is done. Absent when there is nothing to stop.
   */
  release?(): Promise<void>;
}

const warned = new Set<string>();

/**
 * missingBackend is what a harness factory calls when its backend is not there: it fails under
 * CI=true, where every store must be tested, and otherwise skips the calling suite with a warning
 * printed once per driver and run.
 */
export function missingBackend(context: Mocha.Context, driver: string, what: string): never {
  if (process.env['CI'] === 'true') throw new Error(`CI=true but the ${driver} store cannot be tested: ${what}`);
  if (!warned.has(driver)) {
    warned.add(driver);
    process.stderr.write(`\n  !!! ${what}: ${driver.toUpperCase()} DRIVER CONFORMANCE TESTS ARE SKIPPED.\n\n`);
  }
  context.skip();
}

/** A fresh instance ID valid for every driver (Bigtable's rule is the strictest: 6-33 characters). */
export function randomInstanceId(): string {
  return `inst-${randomBytes(4).toString('hex')}`;
}

export interface OpenedStore {
  readonly store: DataStore;
  readonly harness: DriverHarness;
  /** The served instances, fresh for this store; `instance` is the first. */
  readonly instances: readonly string[];
  readonly instance: string;
}

/**
 * useDriverStore opens a fresh store through `factory` before the calling suite's tests and
 * closes it after them. Returns an accessor for the tests.
 */
export function useDriverStore(factory: DriverHarnessFactory, options: { instanceCount?: number } = {}): () => OpenedStore {
  let opened: OpenedStore | undefined;
  before(async function () {
    this.timeout(60_000);
    const harness = await factory.make(this);
    const instances = Array.from({ length: options.instanceCount ?? 1 }, randomInstanceId);
    const store = await harness.open(instances);
    opened = { store, harness, instances, instance: instances[0] ?? '' };
  });
  after(async function () {
    this.timeout(60_000);
    if (opened !== undefined) await opened.harness.close(opened.store);
    opened = undefined;
  });
  return () => {
    if (opened === undefined) throw new Error('the store was not opened');
    return opened;
  };
}
