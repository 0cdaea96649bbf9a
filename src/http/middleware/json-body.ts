import bourne from '@hapi/bourne';
import type { Context, Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import { ApiError } from '../../service/errors.ts';
import { nextTurn } from '../../lib/slices.ts';
import type { AppState } from '../app-state.ts';
import { type BodyBudget, COUNTED_BODY_BYTES } from '../admission/body-budget.ts';
import { parseInPieces } from '../json/json-pieces.ts';
import { shorten } from '../../service/text.ts';

const JSON_TYPES = ['application/json', '+json'];

export interface JsonBodyOptions {
  /** Largest body, in bytes after decompression. */
  readonly limitBytes: number;
  /**
   * Least average rate, in bytes per second, at which the body must arrive once `rateGraceMs` has
   * passed; 0 for none. A slower body is refused with 408 REQUEST_TIMEOUT and its connection closed.
   */
  readonly minBytesPerSecond?: number;
  /** How long a body may take before its rate is checked. */
  readonly rateGraceMs?: number;
  /**
   * The bytes of large bodies read and handled at once, shared by every route; a body waits at
   * most `budgetWaitMs` to be admitted, then is refused with 503 OVERLOADED.
   */
  readonly budget?: BodyBudget;
  readonly budgetWaitMs?: number;
}

/** How long a large body may wait to be admitted before it is read. */
export const BODY_BUDGET_WAIT_MS = 10_000;

/** How long a body may take before its rate is checked: a round trip or two on a slow link, and `Expect: 100-continue`. */
export const BODY_RATE_GRACE_MS = 1000;
/** How often the rate is checked. */
const RATE_CHECK_INTERVAL_MS = 250;

// JSON text is UTF-8 (RFC 8259 §8.1). fatal: bytes that are not UTF-8 are an error, not U+FFFD.
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });
/**
 * A body of this size or more is decoded this many bytes per slice, yielding between them, and
 * parsed a piece at a time (json-pieces.ts). Joining, decoding and parsing a large body in one go was the
 * longest stretch of a large write (figures: docs/performance.md).
 */
const PIECE_BYTES = 1024 * 1024;
// What may come before the first value, per RFC 8259; a body must be an object or an array.
const OBJECT_OR_ARRAY = /^[\x20\x09\x0a\x0d]*[[{]/;

/**
 * jsonBody reads a JSON request body into ctx.request.body and turns every way a body can be
 * unacceptable into its API error, with a 4xx status: a wrong or repeated Content-Type or
 * charset, a Content-Encoding it cannot read or that does not match the bytes (truncated or not
 * compressed at all), a body over the size limit (also once decompressed), arriving too slowly,
 * cut short, not UTF-8, not JSON, not an object or array, or with a `__proto__` key. Without a
 * body, ctx.request.body stays undefined, for the schema to report as missing.
 *
 * koa-body reads the bytes (decompressing them with co-body) undecoded: with an empty encoding,
 * raw-body hands back the bytes as one Buffer. They are then decoded as UTF-8 strictly here. A body
 * with bytes that are not UTF-8 is refused, so no caller's key or value is ever silently replaced.
 */
export function jsonBody(options: JsonBodyOptions): Middleware<AppState> {
  const read = koaBody({
    json: false,
    text: true,
    textTypes: JSON_TYPES,
    // No decoding while reading (raw-body's `encoding` is falsy): a large body is not turned into a
    // string and back, which held the event loop in proportion to its size (docs/performance.md).
    encoding: '',
    textLimit: options.limitBytes,
    urlencoded: false,
    multipart: false,
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
  });
  const minRate = options.minBytesPerSecond ?? 0;
  const graceMs = options.rateGraceMs ?? BODY_RATE_GRACE_MS;

  return async (ctx, next) => {
    const type = ctx.is(JSON_TYPES);
    if (type === null || ctx.request.length === 0) {
      await next(); // no body: ctx.request.body stays undefined
      return;
    }
    // Node keeps the first of repeated Content-Type headers; a proxy may have read the last.
    if ((ctx.req.headersDistinct['content-type']?.length ?? 0) > 1) {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Send one Content-Type header, not several.');
    }
    if (type === false) {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `The body must be application/json, not "${shorten(ctx.get('Content-Type'))}".`);
    }
    const charset = ctx.request.charset.toLowerCase();
    if (charset !== '' && charset !== 'utf-8' && charset !== 'utf8') {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `The body must be UTF-8, not "${shorten(charset)}".`);
    }
    // Content codings are case-insensitive (RFC 9110 §8.4.1); the decompressor knows them in lowercase.
    const coding = ctx.req.headers['content-encoding'];
    if (coding !== undefined) ctx.req.headers['content-encoding'] = coding.trim().toLowerCase();

    // The body is admitted before any of it is read; its bytes are given back once the request is handled.
    const release = await admitBody(ctx, options, coding !== undefined);
    try {
      let bytes: Buffer;
      try {
        bytes = await withMinimumRate(ctx, { minRate, graceMs }, async () => {
          await read(ctx, async () => {});
          const bytes: unknown = ctx.request.body;
          return Buffer.isBuffer(bytes) ? bytes : Buffer.alloc(0);
        });
      } catch (error) {
        throw bodyError(error, options.limitBytes, coding);
      } finally {
        // The undecoded bytes are not the body; nothing may read them.
        delete ctx.request.body;
      }
      ctx.request.body = (await parseJson(bytes)) as NonNullable<typeof ctx.request.body>;
      await next();
    } finally {
      release?.();
    }
  };
}

/**
 * Waits until the shared budget admits the body, when it is large enough to count: its
 * Content-Length, or the largest body allowed when the length is unknown (chunked) or the body
 * is compressed (its size is known only once read). Refuses it with 503 OVERLOADED when it is
 * not admitted in time.
 */
async function admitBody(ctx: Context, options: JsonBodyOptions, compressed: boolean): Promise<(() => void) | undefined> {
  if (options.budget === undefined) return undefined;
  const length = ctx.request.length;
  const bytes = compressed || length === undefined ? options.limitBytes : Math.min(length, options.limitBytes);
  if (bytes < COUNTED_BODY_BYTES) return undefined;
  const release = await options.budget.acquire(bytes, options.budgetWaitMs ?? BODY_BUDGET_WAIT_MS);
  if (release === undefined) {
    (ctx.state as AppState).shedBy = 'body_bytes';
    throw new ApiError('OVERLOADED', 'The service is reading as many large bodies as its memory allows. Retry shortly.');
  }
  return release;
}

/**
 * Parses the bytes of a body as a JSON object or array in UTF-8, or throws MALFORMED_JSON. A large
 * body yields to the event loop before each piece of PIECE_BYTES it decodes, and between the
 * pieces it parses.
 */
export async function parseJson(bytes: Uint8Array): Promise<unknown> {
  let text: string;
  try {
    text = bytes.length < PIECE_BYTES ? STRICT_UTF8.decode(bytes) : await decodeInPieces(bytes);
  } catch {
    throw new ApiError('MALFORMED_JSON', 'The body is not valid UTF-8. Send bytes that are not UTF-8 text in base64.');
  }
  if (!OBJECT_OR_ARRAY.test(text)) throw new ApiError('MALFORMED_JSON', 'The body is not a JSON object or array.');
  try {
    return bytes.length < PIECE_BYTES ? safeParse(text) : await parseInPieces(text, safeParse);
  } catch (error) {
    throw new ApiError('MALFORMED_JSON', `The body is not a valid JSON object or array${whereJsonBreaks(error)}.`);
  }
}

/** JSON.parse that refuses `__proto__` keys (bourne), which could pollute prototypes downstream. */
function safeParse(text: string): unknown {
  return bourne.parse(text, { protoAction: 'error' });
}

/** Strict UTF-8 decoding a piece (a slice) at a time, yielding before each; throws on bytes that are not UTF-8. */
async function decodeInPieces(bytes: Uint8Array): Promise<string> {
  // A decoder of its own: between pieces it holds the first bytes of a character cut in two.
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let text = '';
  for (let start = 0; start < bytes.length; start += PIECE_BYTES) {
    await nextTurn();
    text += decoder.decode(bytes.subarray(start, start + PIECE_BYTES), { stream: true });
  }
  // Throws if the body ends within a character.
  return text + decoder.decode();
}

/**
 * Where a body's JSON breaks, in our words: the parser's own message is an implementation's
 * wording (and quotes the input), so only the position is taken from it.
 */
function whereJsonBreaks(error: unknown): string {
  const message = error instanceof Error ? error.message : '';
  if (message.includes('forbidden prototype property')) return ': it has a "__proto__" key';
  if (message.includes('end of JSON input')) return ': it ends before the JSON does';
  const at = /at position (\d+) \(line (\d+) column (\d+)\)/.exec(message);
  if (at !== null) return `: it breaks at line ${at[2]}, column ${at[3]} (character ${Number(at[1]) + 1})`;
  const token = /^Unexpected token '(.{1,4})'/u.exec(message);
  return token !== null ? `: unexpected ${JSON.stringify(token[1])}` : '';
}

/** Thrown (and mapped to 408) when a body arrives slower than the minimum rate. */
class BodyTooSlowError extends Error {}

/**
 * Runs `reading` and fails it with BodyTooSlowError when, after the grace period, the bytes
 * received since it started average less than `minRate` per second. The rest of such a body is
 * never read, so its connection is closed after the answer.
 */
async function withMinimumRate<T>(ctx: Context, rate: { minRate: number; graceMs: number }, reading: () => Promise<T>): Promise<T> {
  if (rate.minRate <= 0) return reading();
  const { socket } = ctx.req;
  const startBytes = socket.bytesRead;
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const tooSlow = new Promise<never>((_, reject) => {
    timer = setInterval(() => {
      const elapsedMs = performance.now() - started;
      if (elapsedMs < rate.graceMs) return;
      if (socket.bytesRead - startBytes < (rate.minRate * elapsedMs) / 1000) reject(new BodyTooSlowError());
    }, RATE_CHECK_INTERVAL_MS);
    timer.unref();
  });
  const body = reading();
  try {
    return await Promise.race([body, tooSlow]);
  } catch (error) {
    if (error instanceof BodyTooSlowError) {
      (ctx.state as AppState).shedBy = 'body_rate';
      // The reader fails once the connection closes; nobody waits for it any more.
      body.catch(() => {});
      ctx.set('Connection', 'close');
    }
    throw error;
  } finally {
    clearInterval(timer);
  }
}

// raw-body reports with http-errors style status and type fields; zlib with its own codes.
function bodyError(error: unknown, limitBytes: number, coding: string | undefined): unknown {
  if (error instanceof BodyTooSlowError) {
    return new ApiError('REQUEST_TIMEOUT', 'The body arrived too slowly. Send it at once, or at least at the rate the service asks for.');
  }
  const { status, type, code, errno } = error as { status?: number; type?: string; code?: unknown; errno?: unknown };
  if (status === 413) {
    return new ApiError('PAYLOAD_TOO_LARGE', `The body is larger than the limit of ${limitBytes} bytes.`);
  }
  if (status === 415) {
    return new ApiError('UNSUPPORTED_MEDIA_TYPE', `The body has a Content-Encoding the service cannot read ("${shorten(coding ?? '')}"); use gzip, deflate or br.`);
  }
  if (type === 'request.aborted' || type === 'request.size.invalid') {
    return new ApiError('MALFORMED_JSON', 'The body was cut short.');
  }
  // The decompressor's errors (zlib's Z_DATA_ERROR, Z_BUF_ERROR for data cut short, brotli's
  // ERR__ERROR_FORMAT_*…): data that is not in the format Content-Encoding names.
  if (coding !== undefined && coding.trim().toLowerCase() !== 'identity' && typeof code === 'string' && typeof errno === 'number') {
    return new ApiError('MALFORMED_JSON', `The body is not valid ${shorten(coding ?? '')} data, as its Content-Encoding says it is.`);
  }
  return error;
}
