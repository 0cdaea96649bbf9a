import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { ConfigError } from '../config.ts';
import { AccessFileError } from './access-files.ts';

/** Largest access file read: far above any real list of keys or grants, far below trouble. */
const MAX_FILE_BYTES = 1024 * 1024;

/** What one read of the file found: content that is in force (new or unchanged), or why it was not used. */
export type FileCheckOutcome = 'valid' | 'unreadable' | 'invalid';

export interface ReloadingFileOptions<T> {
  /** The environment variable that names the file, for messages. */
  readonly variable: string;
  readonly path: string;
  /** Turns the file's text into its value, or throws AccessFileError. */
  readonly parse: (text: string) => T;
  /** How often the file is read again to look for a change. */
  readonly intervalMs: number;
  readonly logger: Logger;
  /** Called with every value loaded, at start and on each change (to warn about its content). */
  readonly onLoad?: (value: T) => void;
  /** What to log about a loaded value, e.g. how many entries it has. Never a secret. */
  readonly summarize: (value: T) => Record<string, unknown>;
  /**
   * Told what every read of the file found, at start and at each interval, so that an edit that
   * never applies shows in the metrics and not only in one log line.
   */
  readonly onCheck?: (outcome: FileCheckOutcome) => void;
}

/**
 * ReloadingFile holds the parsed content of a file that may change while the service runs (a
 * Kubernetes Secret or ConfigMap volume) and picks up each change without a restart.
 *
 * It reads the whole file again every `intervalMs` and compares the bytes with the last ones it
 * saw, rather than watching it: Kubernetes updates such volumes by swapping a symlink to a new
 * directory, which fs.watch does not reliably report and which can leave the mtime unchanged
 * or older; comparing content misses nothing. The files are a few kilobytes, so a read every
 * few seconds costs nothing measurable, and requests never wait on the file system.
 *
 * A file that becomes invalid or unreadable never opens or closes access by accident: the last
 * good content stays in force, the problem is logged (once per distinct bad content), and every
 * read that finds it so is reported to `onCheck` (kvcrud_access_file_* metrics).
 * At start-up there is no last good content, so an invalid file is a ConfigError.
 */
export class ReloadingFile<T> {
  readonly #options: ReloadingFileOptions<T>;
  readonly #timer: NodeJS.Timeout;
  #value: T;
  /** The bytes last read (or the error code last met), to tell a change from the same problem again. */
  #lastSeen: string;
  /** What the content last seen was found to be. */
  #lastOutcome: FileCheckOutcome = 'valid';
  #checking = false;

  private constructor(options: ReloadingFileOptions<T>, text: string, value: T) {
    this.#options = options;
    this.#value = value;
    this.#lastSeen = text;
    this.#timer = setInterval(() => void this.check(), options.intervalMs);
    // The timer alone must not keep the process alive.
    this.#timer.unref();
  }

  /** Reads and parses the file now; throws a ConfigError naming the variable if it is unreadable or invalid. */
  static open<T>(options: ReloadingFileOptions<T>): ReloadingFile<T> {
    const where = `${options.variable} file "${options.path}"`;
    let text: string;
    try {
      text = readBounded(readFileSync(options.path));
    } catch (error) {
      throw new ConfigError([`${where} cannot be read (${describeReadError(error)})`]);
    }
    let value: T;
    try {
      value = options.parse(text);
    } catch (error) {
      if (!(error instanceof AccessFileError)) throw error;
      throw new ConfigError(error.problems.map((problem) => `${where}: ${problem}`));
    }
    options.onLoad?.(value);
    options.logger.info({ file: options.variable, path: options.path, ...options.summarize(value) }, `loaded ${options.variable}`);
    options.onCheck?.('valid');
    return new ReloadingFile(options, text, value);
  }

  /** The content last read that was valid. */
  get value(): T {
    return this.#value;
  }

  /** Reads the file and applies a valid change. Runs every intervalMs; callable directly (tests). */
  async check(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    try {
      this.#lastOutcome = await this.#read();
      this.#options.onCheck?.(this.#lastOutcome);
    } finally {
      this.#checking = false;
    }
  }

  async #read(): Promise<FileCheckOutcome> {
    const { variable, path, logger } = this.#options;
    let text: string;
    try {
      text = readBounded(await readFile(path));
    } catch (error) {
      const reason = describeReadError(error);
      if (this.#lastSeen !== `\0${reason}`) {
        this.#lastSeen = `\0${reason}`;
        logger.error({ file: variable, path, reason }, `${variable} cannot be read; the last valid content stays in force`);
      }
      return 'unreadable';
    }
    if (text === this.#lastSeen) return this.#lastOutcome;
    this.#lastSeen = text;
    let value: T;
    try {
      value = this.#options.parse(text);
    } catch (error) {
      const problems = error instanceof AccessFileError ? error.problems : [String(error)];
      logger.error({ file: variable, path, problems }, `${variable} is invalid; the last valid content stays in force`);
      return 'invalid';
    }
    this.#options.onLoad?.(value);
    this.#value = value;
    logger.info({ file: variable, path, ...this.#options.summarize(value) }, `reloaded ${variable}`);
    return 'valid';
  }

  /** Stops looking for changes. */
  close(): void {
    clearInterval(this.#timer);
  }
}

function readBounded(bytes: Buffer): string {
  if (bytes.length > MAX_FILE_BYTES) throw new RangeError(`larger than ${MAX_FILE_BYTES} bytes`);
  return bytes.toString('utf8');
}

function describeReadError(error: unknown): string {
  if (error instanceof RangeError) return error.message;
  return (error as NodeJS.ErrnoException).code ?? String(error);
}
