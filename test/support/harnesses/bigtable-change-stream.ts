import { BigtableStore } from '../../../src/store/bigtable/bigtable-store.ts';
import { ChangeStreamStandIn } from '../change-stream-stand-in.ts';
import type { DriverHarnessFactory } from '../driver-harness.ts';
import { TEST_PROJECT, emulatorHost } from '../emulator.ts';
import { RecordingFront } from '../recording-front.ts';

let served: Promise<{ standIn: ChangeStreamStandIn; front: RecordingFront }> | undefined;

/**
 * Bigtable with its change feed: data calls to the emulator through a front that records each
 * committed write as Bigtable's change stream would (recording-front.ts), change stream calls to
 * the stand-in serving them (change-stream-stand-in.ts), which the emulator cannot. The store is
 * the driver's BigtableStore, opened with the stand-in as its changeStreamHost.
 */
export const harness: DriverHarnessFactory = {
  driver: 'bigtable with a change stream stand-in',
  async make(context) {
    const host = emulatorHost(context);
    served ??= (async () => {
      const standIn = await ChangeStreamStandIn.start();
      return { standIn, front: await RecordingFront.start(host, standIn) };
    })();
    const { standIn, front } = await served;
    return {
      traits: { fastWideWrites: false, propertyRuns: 10 },
      open: (instances) =>
        Promise.resolve(new BigtableStore({ projectId: TEST_PROJECT, instanceIds: instances, emulatorHost: front.host, changeStreamHost: `127.0.0.1:${standIn.port}` })),
      close: (store) => store.close(),
    };
  },
  async release() {
    if (served === undefined) return;
    const { standIn, front } = await served;
    served = undefined;
    await Promise.all([front.close(), standIn.close()]);
  },
};
