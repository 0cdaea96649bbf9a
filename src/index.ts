/**
 * The process entry. The heap is sized first: unless whoever started the process chose its size,
 * the process replaces itself (same PID, same arguments) with one started with the flags chosen
 * from its memory limit, and the C allocator's settings (heap-size.ts). Tracing, when the OTEL_* variables ask for it, must be
 * started before the modules it instruments are loaded, so the service itself (server.ts) is
 * imported only after.
 */
import { totalmem } from 'node:os';
import { HEAP_CHOICE_VARIABLE, allocatorEnvironment, heapChoice, heapFlags, heapSizeChosenBy, releaseHeapFlags } from './heap-size.ts';

// process.execve is missing where the platform has no execve (Windows): Node's defaults then.
if (process.execve !== undefined && !heapSizeChosenBy(process.execArgv, process.env['NODE_OPTIONS'])) {
  const choice = heapChoice(process.constrainedMemory(), totalmem());
  process.execve(process.execPath, [process.execPath, ...heapFlags(choice), ...process.execArgv, ...process.argv.slice(1)], {
    ...process.env,
    ...allocatorEnvironment(process.env),
    [HEAP_CHOICE_VARIABLE]: JSON.stringify(choice),
  });
}

// Whoever chose the main thread's heap, the threads started from here on are sized by their own limits.
releaseHeapFlags();

const { startTracing, tracingRequested } = await import('./telemetry/tracing.ts');
if (tracingRequested(process.env)) await startTracing();
await import('./server.ts');
