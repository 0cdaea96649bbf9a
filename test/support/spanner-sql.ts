import { type Database, Spanner } from '@google-cloud/spanner';
import { credentials } from '@grpc/grpc-js';
import { type Logger, pino } from 'pino';
import { SpannerStore } from '../../src/store/spanner/spanner-store.ts';
import { spannerTestInstance } from './harnesses/spanner.ts';
import { requireSpanner, sharedSpannerEmulator } from './spanner-emulator.ts';
import type { DriverHarnessFactory } from './driver-harness.ts';
import { TEST_PROJECT } from './emulator.ts';

/**
 * A Spanner store whose Spanner instance the test knows, and a plain client on the same emulator
 * that speaks only SQL to it: the cross-check that what kvcrud writes is what Spanner holds.
 */
export interface SpannerSide {
  readonly harness: DriverHarnessFactory;
  /** The Spanner instance the harness's stores use. */
  readonly instance: string;
  /** The database of a kvcrud instance, through a client of the test's own. */
  database(kvcrudInstance: string): Promise<Database>;
  close(): Promise<void>;
}

/** `logger`: what the stores log (by default nothing). */
export function spannerSide(logger: Logger = pino({ level: 'silent' })): SpannerSide {
  const instance = spannerTestInstance();
  let client: Spanner | undefined;
  return {
    instance,
    harness: {
      driver: 'spanner',
      make(context) {
        requireSpanner(context);
        return Promise.resolve({
          traits: { fastWideWrites: true, propertyRuns: 25 },
          async open(instances) {
            const emulator = await sharedSpannerEmulator();
            return SpannerStore.open({ projectId: TEST_PROJECT, instance, emulatorHost: emulator.host, instances, logger });
          },
          close: (store) => store.close(),
        });
      },
    },
    async database(kvcrudInstance) {
      const emulator = await sharedSpannerEmulator();
      client ??= new Spanner({
        projectId: TEST_PROJECT,
        servicePath: '127.0.0.1',
        port: emulator.port,
        sslCreds: credentials.createInsecure(),
        universeDomain: 'googleapis.com',
        disableBuiltInMetrics: true,
      });
      return client.instance(instance).database(kvcrudInstance);
    },
    async close() {
      await client?.close();
    },
  };
}
