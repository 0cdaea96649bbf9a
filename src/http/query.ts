import { ApiError } from '../service/errors.ts';

const NO_LISTS: ReadonlySet<string> = new Set();

/**
 * parseQuery decodes a query string strictly. URLSearchParams would replace bytes that are not
 * UTF-8 with U+FFFD and so read a different row than the caller named; here such a parameter is
 * a validation error. Repeated parameters become arrays, for the schema to reject.
 *
 * The parameters named in `lists` are comma-separated lists (OpenAPI `style: form, explode:
 * false`): split at each literal comma before decoding, so that an item holds a comma sent as
 * %2C. Each becomes an array, of one item if it has no comma; repeating one adds to it.
 */
export function parseQuery(querystring: string, lists: ReadonlySet<string> = NO_LISTS): Record<string, string | string[]> {
  const params = new Map<string, string | string[]>();
  for (const part of querystring.split('&')) {
    if (part === '') continue;
    const separator = part.indexOf('=');
    const rawName = separator === -1 ? part : part.slice(0, separator);
    const rawValue = separator === -1 ? '' : part.slice(separator + 1);
    const name = decode(rawName, rawName);
    const previous = params.get(name);
    if (lists.has(name)) {
      // Repeating a list parameter adds to the list.
      const items = rawValue.split(',').map((item) => decode(item, name));
      params.set(name, previous === undefined ? items : [previous, items].flat());
      continue;
    }
    const value = decode(rawValue, name);
    params.set(name, previous === undefined ? value : [previous, value].flat());
  }
  return Object.fromEntries(params);
}

function decode(text: string, name: string): string {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    throw new ApiError('VALIDATION_FAILED', `Query parameter "${name}" is not valid percent-encoded UTF-8.`, {
      errors: [{ path: name, message: `${name} is not valid percent-encoded UTF-8` }],
    });
  }
}
