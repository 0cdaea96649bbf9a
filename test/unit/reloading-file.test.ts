import { mkdirSync, renameSync, rmSync, statSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { pino } from 'pino';
import { type ApiKeyEntry, parseApiKeysFile } from '../../src/auth/access-files.ts';
import { type FileCheckOutcome, ReloadingFile } from '../../src/auth/reloading-file.ts';
import { ConfigError } from '../../src/config.ts';
import { eventually, keysFile, newApiKey, replaceFile, tempDirectory } from '../support/access-files.ts';

const fileWith = (...names: string[]) => keysFile(names.map((name) => ({ name, key: newApiKey(), role: 'reader', instances: ['*'] })));
const names = (file: ReloadingFile<ApiKeyEntry[]>) => file.value.map((entry) => entry.name);

describe('ReloadingFile (the keys and grants files)', () => {
  const directory = tempDirectory();
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const opened: Array<ReloadingFile<ApiKeyEntry[]>> = [];
  let counter = 0;

  function open(path: string, intervalMs = 60_000, onCheck?: (outcome: FileCheckOutcome) => void): ReloadingFile<ApiKeyEntry[]> {
    const file = ReloadingFile.open({
      variable: 'AUTH_API_KEYS_FILE',
      path,
      parse: parseApiKeysFile,
      intervalMs,
      logger,
      summarize: (keys) => ({ keys: keys.length }),
      ...(onCheck === undefined ? {} : { onCheck }),
    });
    opened.push(file);
    return file;
  }
  function newPath(): string {
    counter += 1;
    return join(directory.path, `keys-${counter}.json`);
  }
  const errorsLogged = () => logs.filter((line) => line['level'] === 50);

  beforeEach(() => {
    logs.length = 0;
  });
  after(() => {
    for (const file of opened) file.close();
    directory.remove();
  });

  it('loads the file at start, logging how many entries it has', () => {
    const path = newPath();
    writeFileSync(path, fileWith('a', 'b'));
    expect(names(open(path))).to.deep.equal(['a', 'b']);
    expect(logs[0]).to.include({ msg: 'loaded AUTH_API_KEYS_FILE', keys: 2, path });
  });

  it('throws a ConfigError naming the variable for a missing or invalid file at start', () => {
    const missing = join(directory.path, 'missing.json');
    expect(() => open(missing)).to.throw(ConfigError, `AUTH_API_KEYS_FILE file "${missing}" cannot be read (ENOENT)`);
    const invalid = newPath();
    writeFileSync(invalid, '{"keys":[{"name":"a"}]}');
    try {
      open(invalid);
      expect.fail('opened an invalid file');
    } catch (error) {
      expect(error).to.be.instanceOf(ConfigError);
      expect((error as ConfigError).problems[0]).to.equal(`AUTH_API_KEYS_FILE file "${invalid}": keys[0].sha256 is required`);
    }
  });

  it('picks up a changed file, by itself, within its interval', async () => {
    const path = newPath();
    writeFileSync(path, fileWith('a'));
    const file = open(path, 20);
    replaceFile(path, fileWith('a', 'b'));
    await eventually(() => Promise.resolve(names(file).length === 2), 2000, 'the change was picked up');
    expect(logs.some((line) => line['msg'] === 'reloaded AUTH_API_KEYS_FILE' && line['keys'] === 2)).to.equal(true);
  });

  it('keeps the last valid content when the file becomes invalid, logging the problem once', async () => {
    const path = newPath();
    writeFileSync(path, fileWith('a'));
    const file = open(path);
    replaceFile(path, '{"keys": [ {"name": "a", "role": "admin"');
    await file.check();
    await file.check();
    expect(names(file)).to.deep.equal(['a']);
    expect(errorsLogged()).to.have.length(1);
    expect(errorsLogged()[0]).to.include({ msg: 'AUTH_API_KEYS_FILE is invalid; the last valid content stays in force' });

    replaceFile(path, fileWith('c'));
    await file.check();
    expect(names(file)).to.deep.equal(['c']);
  });

  it('reports what every read found, so an edit that never applies shows while it lasts', async () => {
    const path = newPath();
    writeFileSync(path, fileWith('a'));
    const outcomes: FileCheckOutcome[] = [];
    const file = open(path, 60_000, (outcome) => outcomes.push(outcome));
    await file.check();
    replaceFile(path, fileWith('a').replace(/\]\}$/, ',]}')); // a trailing comma
    await file.check();
    await file.check();
    unlinkSync(path);
    await file.check();
    writeFileSync(path, 'x'.repeat(1024 * 1024 + 1));
    await file.check();
    replaceFile(path, fileWith('b'));
    await file.check();
    await file.check();
    expect(outcomes).to.deep.equal(['valid', 'valid', 'invalid', 'invalid', 'unreadable', 'unreadable', 'valid', 'valid']);
    expect(names(file)).to.deep.equal(['b']);
  });

  it('keeps the last valid content while the file is missing, logging it once', async () => {
    const path = newPath();
    writeFileSync(path, fileWith('a'));
    const file = open(path);
    unlinkSync(path);
    await file.check();
    await file.check();
    expect(names(file)).to.deep.equal(['a']);
    expect(errorsLogged()).to.have.length(1);
    expect(errorsLogged()[0]).to.include({ reason: 'ENOENT' });
  });

  it('sees a Kubernetes Secret update (a symlink swap) even when the new file has the old mtime', async () => {
    // The layout the kubelet's atomic writer makes: keys.json -> ..data/keys.json, ..data -> ..<timestamp>.
    const volume = join(directory.path, 'secret-volume');
    mkdirSync(join(volume, '..2026_01_01_00_00_00.1'), { recursive: true });
    writeFileSync(join(volume, '..2026_01_01_00_00_00.1', 'keys.json'), fileWith('old'));
    symlinkSync('..2026_01_01_00_00_00.1', join(volume, '..data'));
    symlinkSync('..data/keys.json', join(volume, 'keys.json'));
    const file = open(join(volume, 'keys.json'));
    expect(names(file)).to.deep.equal(['old']);

    const { atime, mtime } = statSync(join(volume, 'keys.json'));
    mkdirSync(join(volume, '..2026_01_01_00_01_00.2'));
    writeFileSync(join(volume, '..2026_01_01_00_01_00.2', 'keys.json'), fileWith('new'));
    utimesSync(join(volume, '..2026_01_01_00_01_00.2', 'keys.json'), atime, mtime);
    symlinkSync('..2026_01_01_00_01_00.2', join(volume, '..data_tmp'));
    renameSync(join(volume, '..data_tmp'), join(volume, '..data'));
    rmSync(join(volume, '..2026_01_01_00_00_00.1'), { recursive: true });

    await file.check();
    expect(names(file)).to.deep.equal(['new']);
    expect(errorsLogged()).to.deep.equal([]);
  });
});
