import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { StoreError } from '../errors.ts';
import { SQLITE_BUSY, SQLITE_LOCKED, sqliteCode } from './sqlite-errors.ts';

/** The lock file inside the data directory. */
export const LOCK_FILE = 'kvcrud.lock';

/**
 * ProcessLock gives one process the data directory. The database itself cannot be held
 * exclusively, since the store's own threads open it several times (a writer and readers), so the
 * lock is held on a file of its own, through SQLite: an exclusive lock in locking_mode=EXCLUSIVE
 * is a POSIX advisory lock (fcntl), which the kernel releases when the process ends, however it
 * ends (SIGKILL included). Within one process SQLite keeps track of its own locks, so a second
 * open of the same directory fails there too.
 */
export class ProcessLock {
  readonly #db: DatabaseSync;

  private constructor(db: DatabaseSync) {
    this.#db = db;
  }

  /** Takes the lock, or throws StoreError UNAVAILABLE when another process (or store) holds it. */
  static acquire(dataDir: string): ProcessLock {
    // timeout 0: the holder is another kvcrud, and waiting would not help.
    const db = new DatabaseSync(join(dataDir, LOCK_FILE), { timeout: 0 });
    try {
      db.exec('PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; COMMIT');
    } catch (error) {
      db.close();
      const code = sqliteCode(error);
      if (code === SQLITE_BUSY || code === SQLITE_LOCKED) {
        throw new StoreError('UNAVAILABLE', `data directory ${dataDir} is in use by another process`, { cause: error });
      }
      throw new StoreError('INTERNAL', `cannot lock data directory ${dataDir}: ${(error as Error).message}`, { cause: error });
    }
    return new ProcessLock(db);
  }

  release(): void {
    if (this.#db.isOpen) this.#db.close();
  }
}
