import { execFileSync } from 'node:child_process';
import { expect } from 'chai';

// In a process of its own, since this one has loaded every client already: which backend
// clients are loaded after the drivers' list is imported, then after a Bigtable store is opened.
const SCRIPT = `
import { createRequire } from 'node:module';
import pino from 'pino';
const clients = () => [...new Set(Object.keys(createRequire(import.meta.url).cache)
  .map((path) => /node_modules\\/(@google-cloud\\/bigtable|@google-cloud\\/spanner|redis|@redis\\/client)\\//.exec(path)?.[1])
  .filter((name) => name !== undefined))].sort();
const { findDriver } = await import('./src/store/drivers.ts');
const atStart = clients();
const store = await findDriver('bigtable').open(
  { name: 'main', instances: ['loading-test'], settings: { projectId: 'kvcrud-test', emulatorHost: '127.0.0.1:9' } },
  { logger: pino({ level: 'silent' }) },
);
const opened = clients();
await store.close();
console.log(JSON.stringify({ atStart, opened }));
`;

describe('store drivers', () => {
  it('load a backend client only when a store of theirs is opened', function () {
    this.timeout(30_000);
    const output = execFileSync(process.execPath, ['--input-type=module', '--eval', SCRIPT], { cwd: new URL('../../', import.meta.url).pathname, encoding: 'utf8' });
    const { atStart, opened } = JSON.parse(output.trim().split('\n').at(-1) ?? '') as { atStart: string[]; opened: string[] };
    expect(atStart).to.deep.equal([]);
    expect(opened).to.deep.equal(['@google-cloud/bigtable']);
  });
});
