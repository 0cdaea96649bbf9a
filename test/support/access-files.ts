import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh random API key, as an operator would make one (`openssl rand -base64 32`). */
export function newApiKey(): string {
  return randomBytes(32).toString('base64');
}

/** The hex SHA-256 the keys file stores for a key. */
export function sha256Hex(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export interface KeyEntry {
  readonly name: string;
  readonly key: string;
  readonly role: string;
  readonly instances: readonly string[];
}

/** The AUTH_API_KEYS_FILE content for these keys (digests only). */
export function keysFile(keys: readonly KeyEntry[]): string {
  return JSON.stringify({ keys: keys.map(({ name, key, role, instances }) => ({ name, sha256: sha256Hex(key), role, instances })) });
}

/** A temporary directory for access files, removed by the returned function. */
export function tempDirectory(): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), 'kvcrud-auth-'));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** Replaces a file at once (write aside, rename), so a reader never sees half of it. */
export function replaceFile(path: string, content: string): void {
  writeFileSync(`${path}.tmp`, content);
  renameSync(`${path}.tmp`, path);
}

/** Polls `check` until it returns true, or fails after `timeoutMs`. */
export async function eventually(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
