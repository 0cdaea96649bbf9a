import { ApiError } from '../service/errors.ts';

/**
 * parseQuery decodes a query string strictly. URLSearchParams would replace bytes that are not
 * UTF-8 with U+FFFD and so read a different row than the caller named; here such a parameter is
 * a validation error. Repeated parameters become arrays, for the schema to reject.
 */
export function parseQuery(querystring: string): Record<string, string | string[]> {
  const params = new Map<string, string | string[]>();
  for (const part of querystring.split('&')) {
    if (part === '') continue;
    const separator = part.indexOf('=');
    const rawName = separator === -1 ? part : part.slice(0, separator);
    const rawValue = separator === -1 ? '' : part.slice(separator + 1);
    const name = decode(rawName, rawName);
    const value = decode(rawValue, name);
    const previous = params.get(name);
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
