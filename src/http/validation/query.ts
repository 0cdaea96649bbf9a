import { ApiError } from '../../service/errors.ts';
import { shorten } from '../../service/text.ts';
import { quoted } from './quoted.ts';

/** How much of a query string is read at all. Past either bound the request is refused before anything is decoded. */
export interface QueryLimits {
  /** Most parameters, repeats included. */
  readonly maxParameters: number;
  /** Most times one parameter may appear. */
  readonly maxRepeats: number;
}

/** Far above what any operation takes, far below what costs anything to refuse. */
export const QUERY_LIMITS: QueryLimits = Object.freeze({ maxParameters: 64, maxRepeats: 16 });

const NO_LISTS: ReadonlySet<string> = new Set();

/**
 * parseQuery decodes a query string strictly, in time linear in its length. URLSearchParams
 * would replace bytes that are not UTF-8 with U+FFFD and so read a different row than the caller
 * named; here such a parameter is a validation error. Repeated parameters become arrays, for the
 * schema to reject. More parameters or repeats than `limits` allow are refused as soon as the
 * parser counts one too many.
 *
 * The parameters named in `lists` are comma-separated lists (OpenAPI `style: form, explode:
 * false`): split at each literal comma before decoding, so that an item holds a comma sent as
 * %2C. Each becomes an array, of one item if it has no comma; repeating one adds to it.
 */
export function parseQuery(
  querystring: string,
  limits: QueryLimits = QUERY_LIMITS,
  lists: ReadonlySet<string> = NO_LISTS,
): Record<string, string | string[]> {
  const params = new Map<string, string[]>();
  const listed = new Map<string, string[]>();
  let count = 0;
  for (let start = 0; start <= querystring.length; ) {
    const found = querystring.indexOf('&', start);
    const end = found === -1 ? querystring.length : found;
    if (end > start) {
      count += 1;
      if (count > limits.maxParameters) {
        throw invalidQuery('', `the query has more than ${limits.maxParameters} parameters`, `The query has more than ${limits.maxParameters} parameters.`);
      }
      const part = querystring.slice(start, end);
      const separator = part.indexOf('=');
      const rawName = separator === -1 ? part : part.slice(0, separator);
      const name = decode(rawName, rawName);
      const rawValue = separator === -1 ? '' : part.slice(separator + 1);
      if (lists.has(name)) {
        const items = rawValue.split(',').map((item) => decode(item, name));
        listed.set(name, [...(listed.get(name) ?? []), ...items]);
        start = end + 1;
        continue;
      }
      const value = decode(rawValue, name);
      const values = params.get(name);
      if (values === undefined) {
        params.set(name, [value]);
      } else {
        values.push(value);
        if (values.length > limits.maxRepeats) {
          throw invalidQuery(name, `${shorten(name)} appears more than ${limits.maxRepeats} times`, `Query parameter ${quoted(name)} appears more than ${limits.maxRepeats} times.`);
        }
      }
    }
    start = end + 1;
  }
  // Built from entries, so "__proto__" is an ordinary key.
  const entries: Array<[string, string | string[]]> = [...params].map(([name, values]) => [name, values.length === 1 ? (values[0] ?? '') : values]);
  return Object.fromEntries([...entries, ...listed]);
}

function decode(text: string, name: string): string {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    throw invalidQuery(name, `${shorten(name)} is not valid percent-encoded UTF-8`, `Query parameter ${quoted(name)} is not valid percent-encoded UTF-8.`);
  }
}

/** VALIDATION_FAILED for the query, in the shape validate() gives: the message names the parameter. */
function invalidQuery(name: string, message: string, detail: string): ApiError {
  return new ApiError('VALIDATION_FAILED', detail, { errors: [{ path: shorten(name), message }] });
}
