import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { type ServiceProcess, cleanEnv, runService } from './support/service-process.ts';

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The README's `curl -N` example and the text block after it: what it says a reader sees. */
function feedExample(): { command: string; shown: string } {
  const blocks = [...README.matchAll(/```(\w*)\n([\s\S]*?)```/g)].map(([, language, body]) => ({ language: language ?? '', body: body ?? '' }));
  const index = blocks.findIndex((block) => block.language === 'sh' && block.body.startsWith('curl -N '));
  const shown = blocks[index + 1];
  if (index === -1 || shown?.language !== 'text') throw new Error('the README has no curl -N example followed by a text block');
  return { command: (blocks[index]?.body ?? '').trim(), shown: shown.body };
}

/** The stream's lines with each id and timestamp replaced by a placeholder: they are the run's own. */
function shape(stream: string): string[] {
  return stream
    .trimEnd()
    .split('\n')
    .map((line) => line.replace(/^id: [A-Za-z0-9_-]+$/, 'id: <id>').replace(/"timestamp":"[^"]+"/g, '"timestamp":"<timestamp>"'));
}

/**
 * The README's change feed example, run as it says against a fresh service: `curl -N` started,
 * then the write it names made from elsewhere; curl shows what the README shows, ids and
 * timestamps apart.
 */
describe('README: the change feed example', function () {
  this.timeout(60_000);
  let service: ServiceProcess | undefined;
  let dataDir: string;
  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-readme-feed-'));
    service = await runService(cleanEnv({ PORT: '0', DATA_DIR: dataDir }));
  });
  after(async () => {
    await service?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows what curl -N prints when the write it describes is made while it runs', async () => {
    const { command, shown } = feedExample();
    expect(README).to.include('the `PUT` of `order#1001` above, with `"value": "delivered"`');
    const base = service?.baseUrl ?? '';
    const tables = `${base}/v2/stores/embedded/instances/local/tables`;
    const created = await fetch(tables, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'orders', families: [{ name: 'cf', maxVersions: 3 }] }) });
    expect(created.status).to.equal(201);

    const curl = spawn('bash', ['-c', `exec ${command.replace('localhost:8080', new URL(base).host)}`]);
    let output = '';
    curl.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    try {
      const waitFor = async (text: string) => {
        const until = Date.now() + 15_000;
        while (!output.includes(text)) {
          if (Date.now() > until) throw new Error(`curl printed no ${JSON.stringify(text)}: ${output}`);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      };
      await waitFor('\n\n');
      const written = await fetch(`${tables}/orders/rows/order%231001`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ cells: [{ family: 'cf', column: 'status', value: 'delivered' }] }),
      });
      expect(written.status).to.equal(200);
      await waitFor('event: change\ndata: ');
      await waitFor('}\n\n');
    } finally {
      curl.kill();
    }
    expect(shape(output)).to.deep.equal(shape(shown));
  });
});
