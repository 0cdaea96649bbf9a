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

/** How deep a chain of causes is followed, and how many of an AggregateError's errors are kept. */
const MAX_CAUSES = 5;
const MAX_ERRORS = 5;

export interface LoggedError {
  type: string;
  message: string;
  stack?: string;
  code?: string | number;
  details?: string;
  cause?: LoggedError;
  /** An AggregateError's errors (the first few): a connection refused on every address, say. */
  errors?: LoggedError[];
}

/**
 * errorForLog keeps only the fields of an error that say what went wrong: its type, message,
 * stack, code and gRPC details, the same of its cause and of an AggregateError's errors. It does
 * so for any thrown value, an Error or not: client libraries also reject with plain objects,
 * and the fields are read from those as from an Error. Anything else an error carries (a client
 * library's request config with an Authorization header or a token request's body, gRPC
 * metadata) is left out, so no credential can reach the log through an error.
 */
export function errorForLog(error: unknown, depth = 0): LoggedError {
  if (typeof error !== 'object' || error === null) return { type: typeof error, message: String(error) };
  const { name, message, stack, code, details, cause, errors } = error as Partial<Record<'name' | 'message' | 'stack' | 'code' | 'details' | 'cause' | 'errors', unknown>>;
  const logged: LoggedError = { type: typeName(error, name), message: typeof message === 'string' ? message : '' };
  if (typeof stack === 'string') logged.stack = stack;
  if (typeof code === 'string' || typeof code === 'number') logged.code = code;
  if (typeof details === 'string' && details !== '') logged.details = details;
  if (depth < MAX_CAUSES) {
    if (cause !== undefined) logged.cause = errorForLog(cause, depth + 1);
    if (Array.isArray(errors) && errors.length > 0) logged.errors = errors.slice(0, MAX_ERRORS).map((inner: unknown) => errorForLog(inner, depth + 1));
  }
  // An AggregateError often has no message of its own (Node's for a connection refused on every address).
  if (logged.message === '') logged.message = logged.errors?.map((inner) => inner.message).join('; ') || describeFields(error);
  return logged;
}

function typeName(error: object, name: unknown): string {
  if (typeof name === 'string' && name !== '') return name;
  const constructorName = (error as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof constructorName === 'string' && constructorName !== '' ? constructorName : 'object';
}

/** A value with no message: its field names only, which say what it is without any of its contents. */
function describeFields(error: object): string {
  const fields = Object.keys(error);
  return fields.length === 0 ? 'no message' : `no message; fields: ${fields.slice(0, 10).join(', ')}`;
}
