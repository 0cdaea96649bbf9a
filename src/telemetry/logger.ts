import { type DestinationStream, type Level, type Logger, pino } from 'pino';
import type { LogLevel } from '../config.ts';

// Cloud Logging reads `severity`, not pino's levels; other collectors read `level`.
const SEVERITY: Readonly<Record<Level, string>> = {
  trace: 'DEBUG',
  debug: 'DEBUG',
  info: 'INFO',
  warn: 'WARNING',
  error: 'ERROR',
  fatal: 'CRITICAL',
};

/**
 * createLogger makes the service's logger: JSON lines (to stdout, asynchronously, unless a
 * destination is given)
 * with an RFC 3339 `time`, the level as a word in `level` and as a Cloud Logging `severity`.
 * An error logged as `err` is reduced by errorForLog.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'kvcrud' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label, severity: SEVERITY[label as Level] ?? 'DEFAULT' }) },
    serializers: { err: (error: unknown) => errorForLog(error) },
  };
  // Asynchronous writes to stdout: while one write is in progress the lines that follow are
  // gathered into the next, instead of one blocking write(2) per request line. Nothing waits for a
  // fuller buffer, so a quiet service's lines still appear at once; pino flushes on exit.
  return pino(options, destination ?? pino.destination({ dest: 1, sync: false }));
}

/** How deep a chain of causes is followed. */
const MAX_CAUSES = 5;

export interface LoggedError {
  type: string;
  message: string;
  stack?: string;
  code?: string | number;
  details?: string;
  cause?: LoggedError;
}

/**
 * errorForLog keeps only the fields of an error that say what went wrong: its type, message,
 * stack, code and gRPC details, and the same of its causes. Anything else an error carries (a
 * client library's request config with an Authorization header or a token request's body,
 * gRPC metadata) is left out, so no credential can reach the log through an error.
 */
export function errorForLog(error: unknown, depth = 0): LoggedError {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error) };
  const { code, details } = error as { code?: unknown; details?: unknown };
  const logged: LoggedError = { type: error.name, message: error.message };
  if (error.stack !== undefined) logged.stack = error.stack;
  if (typeof code === 'string' || typeof code === 'number') logged.code = code;
  if (typeof details === 'string' && details !== '') logged.details = details;
  if (error.cause !== undefined && depth < MAX_CAUSES) logged.cause = errorForLog(error.cause, depth + 1);
  return logged;
}
