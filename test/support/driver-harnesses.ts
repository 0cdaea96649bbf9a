import type { DriverHarnessFactory } from './driver-harness.ts';

/**
 * Every store driver's harness, for the driver conformance suite (test/stores/driver-conformance.test.ts).
 * A driver registers with one line here: an import of its test/support/harnesses/<driver>.ts,
 * which exports `harness`.
 */
export const DRIVER_HARNESSES: readonly DriverHarnessFactory[] = (
  await Promise.all([
    import('./harnesses/bigtable.ts'),
    import('./harnesses/bigtable-change-stream.ts'),
    import('./harnesses/embedded.ts'),
    import('./harnesses/redis.ts'),
    import('./harnesses/spanner.ts'),
  ])
).map((module) => module.harness);
