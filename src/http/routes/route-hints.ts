/**
 * What a path no endpoint serves most likely meant, for the detail of its 404 ROUTE_NOT_FOUND.
 * Routing is strict (a trailing slash is never the resource without it), and the paths that miss
 * most often are row paths a URL parser rewrote: fetch, browsers, curl and generated clients
 * remove the dot segments `.` and `..` (also sent as `%2E`), so `…/rows/..` arrives as
 * `…/tables/{table}/` and `…/rows/.` as `…/rows/`, and a WHATWG parser reads a raw `\` as `/`.
 */

// /v2/stores/{store}/instances/{instance}/tables/{table}/ or …/rows/: what a dot-segment key becomes.
const DOT_KEY_REMAINS = /^\/v2\/stores\/[^/]+\/instances\/[^/]+\/tables\/[^/]+\/(?:rows\/)?$/;
// …/rows/{a}/{b}…: a key with a raw "/" (or a "\" a URL parser turned into one).
const SPLIT_KEY = /^\/v2\/stores\/[^/]+\/instances\/[^/]+\/tables\/[^/]+\/rows\/[^/]+\/./;

/** The sentence docs/api-v2.md also says: how to send a key a URL parser would rewrite. */
export const DOT_KEY_ADVICE =
  'URL parsers remove a key "." or ".." from a path, even sent as %2E: send such a key with ?encoding=base64 (as "Lg" or "Li4"), or in a batch body';

/** A sentence to add to the 404 of `path`, or undefined when there is nothing to say. */
export function routeHint(path: string): string | undefined {
  if (SPLIT_KEY.test(path)) return 'A "/" in a row key must be sent percent-encoded, as %2F (and a "\\" as %5C).';
  if (path.length > 1 && path.endsWith('/')) {
    const slash = 'No path of this API ends in "/".';
    return DOT_KEY_REMAINS.test(path) ? `${slash} If this was a row path, its key was removed on the way: ${DOT_KEY_ADVICE}.` : slash;
  }
  return undefined;
}
