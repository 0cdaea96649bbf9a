import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { CONFIG_VARIABLES } from '../src/config.ts';
import { PROBLEM_TYPES } from '../src/http/problems.ts';
import { V2_OPERATIONS } from '../src/http/v2/operations.ts';
import { ERROR_CODES } from '../src/service/errors.ts';
import { publishedLimits } from '../src/service/limits.ts';
import { DRIVERS } from '../src/store/drivers.ts';
import { cleanEnv, runService, type ServiceProcess } from './support/service-process.ts';

const execFileAsync = promisify(execFile);
const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** Each ```sh block that runs curl, with the ```json block that follows it: the documented answer. */
function curlExamples(): Array<{ command: string; expected: string }> {
  const blocks = [...README.matchAll(/```(\w*)\n([\s\S]*?)```/g)].map(([, language, body]) => ({ language, body: body ?? '' }));
  return blocks.flatMap((block, index) => {
    const next = blocks[index + 1];
    return block.language === 'sh' && block.body.startsWith('curl ') && next?.language === 'json'
      ? [{ command: block.body, expected: next.body }]
      : [];
  });
}

/**
 * Timestamps are the time of the run, so each is replaced by a name given in order of first
 * appearance over the whole run: cells the README shows with one timestamp must share one in the
 * answers, and cells it shows with different ones must differ. One namer serves the documented
 * answers, another the real ones.
 */
function timestampNamer(): (json: unknown) => unknown {
  const names = new Map<string, string>();
  return (json) =>
    JSON.parse(JSON.stringify(json), (key, value: unknown) => {
      if (key !== 'timestamp' || typeof value !== 'string') return value;
      expect(value, 'an RFC 3339 UTC timestamp with microseconds').to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
      if (!names.has(value)) names.set(value, `<timestamp ${names.size + 1}>`);
      return names.get(value);
    });
}

describe('README', () => {
  describe('the curl examples, run in order against a service started with no configuration', () => {
    let service: ServiceProcess;
    let dataDir: string;

    before(async () => {
      // What `npm start` on a fresh clone gets: the embedded store, instance "local". Only the
      // port (free, not 8080) and the data directory (fresh, not ./data) differ.
      dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-readme-'));
      service = await runService(cleanEnv({ PORT: '0', DATA_DIR: dataDir }));
    });
    after(async () => {
      await service?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('has examples for all four endpoints', () => {
      const commands = curlExamples().map((example) => example.command);
      for (const endpoint of ['createTable', 'insertData', 'readCellData', 'deleteTable']) {
        expect(commands.some((command) => command.includes(`localhost:8080/v1/local/${endpoint}`)), endpoint).to.equal(true);
      }
    });

    it('have an example of every v2 operation', () => {
      const commands = curlExamples().map((example) => example.command.replaceAll('\\\n', ' '));
      for (const operation of V2_OPERATIONS) {
        const method = operation.method.toUpperCase();
        // The template with any value for each parameter, up to the query.
        const path = new RegExp(
          `localhost:8080${operation.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{\w+\}/g, '[^/?\'\\s:]+')}(?:[?'\\s]|$)`,
        );
        const found = commands.some((command) => path.test(command) && (method === 'GET' ? !/-X (POST|PUT|DELETE)/.test(command.split('&&').at(-1) ?? '') : command.includes(`-X ${method}`)));
        expect(found, `${method} ${operation.path}`).to.equal(true);
      }
    });

    it('answer what the README shows', async () => {
      const host = new URL(service.baseUrl).host;
      const [documentedTimes, answeredTimes] = [timestampNamer(), timestampNamer()];
      for (const { command, expected } of curlExamples()) {
        const { stdout } = await execFileAsync('bash', ['-c', command.replaceAll('localhost:8080', host)]);
        const documented = JSON.parse(expected) as unknown;
        expect(answeredTimes(JSON.parse(stdout)), command).to.deep.equal(documentedTimes(documented));
      }
    });

    it('matches paths case-insensitively, and names in them exactly, as it says', async () => {
      expect(README).to.contain('Paths are matched case-insensitively');
      const create = (path: string) =>
        fetch(new URL(path, service.baseUrl), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"tableName": "case-check", "columnFamily": "cf"}' });
      expect((await create('/V1/local/CreateTable')).status).to.equal(201);
      expect(((await (await create('/v1/LOCAL/createTable')).json()) as { code: string }).code).to.equal('INSTANCE_NOT_FOUND');
      const deleted = await fetch(new URL('/v1/local/deleteTable', service.baseUrl), { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: '{"tableList": ["case-check"]}' });
      expect(deleted.status).to.equal(200);
    });
  });

  it("shows each store's capabilities and limits as its driver publishes them", () => {
    const section = README.slice(README.indexOf('## Data stores'));
    const rows = [...section.matchAll(/^\| `(\w+)`[^|]*\|(.*)\|\s*$/gm)].map(([, name, cells]) => ({ name: name ?? '', cells: (cells ?? '').split('|').map((cell) => cell.trim()) }));
    const header = /^\| \|(.*)\|\s*$/m.exec(section)?.[1]?.split('|').map((cell) => cell.trim().replaceAll('`', '')) ?? [];
    expect(header).to.deep.equal(DRIVERS.map((driver) => driver.name));
    for (const [column, driver] of DRIVERS.entries()) {
      const published: Record<string, unknown> = { ...driver.capabilities, ...publishedLimits(driver.limits) };
      for (const [name, value] of Object.entries(published)) {
        const row = rows.find((candidate) => candidate.name === name);
        const shown = row?.cells[column];
        expect(shown, `${driver.name} ${name}`).to.equal(typeof value === 'boolean' ? (value ? 'yes' : 'no') : Number(value).toLocaleString('en-US'));
      }
    }
  });

  it('lists every error code with its status', () => {
    for (const code of ERROR_CODES) {
      expect(README, code).to.match(new RegExp(`\\| \`${code}\` \\| ${PROBLEM_TYPES[code].status} \\|`));
    }
  });

  it('documents every configuration variable', () => {
    for (const variable of CONFIG_VARIABLES) {
      expect(README, variable).to.match(new RegExp(`^\\| \`${variable}\` \\|`, 'm'));
    }
  });

  it('shows the test and start commands', () => {
    expect(README).to.contain('npm ci && npm test');
    expect(README).to.contain('npm start');
  });
});
