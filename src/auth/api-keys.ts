import { createHash, timingSafeEqual } from 'node:crypto';
import type { Caller } from './access.ts';
import type { ApiKeyEntry } from './access-files.ts';

/**
 * findApiKeyHolder returns the caller holding `key`, or undefined if no entry has its SHA-256.
 *
 * The file stores digests only, so the key is hashed and the 32-byte digest is compared with
 * every entry by crypto.timingSafeEqual, without stopping at a match: the time taken depends on
 * the number of entries, not on which one matches or how many leading bytes agree.
 */
export function findApiKeyHolder(entries: readonly ApiKeyEntry[], key: string): Caller | undefined {
  const digest = createHash('sha256').update(key, 'utf8').digest();
  let holder: ApiKeyEntry | undefined;
  for (const entry of entries) {
    const equal = timingSafeEqual(digest, entry.sha256);
    holder = equal ? entry : holder;
  }
  return holder === undefined ? undefined : { name: `apikey:${holder.name}`, grants: [holder.grant] };
}
