/**
 * The process entry. Tracing, when the OTEL_* variables ask for it, must be started before the
 * modules it instruments are loaded, so the service itself (server.ts) is imported only after.
 */
import { startTracing, tracingRequested } from './telemetry/tracing.ts';

if (tracingRequested(process.env)) await startTracing();
await import('./server.ts');
