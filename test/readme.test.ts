import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
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
const ROOT = new URL('../', import.meta.url);

/** The README and every page under docs/, by path from the repository's root: README first. */
const DOCUMENTS: ReadonlyMap<string, string> = new Map(
  ['README.md', ...readdirSync(new URL('docs/', ROOT), { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.md'))
    .map((path) => `docs/${path.split(sep).join('/')}`)
    .sort()]
    .map((path) => [path, readFileSync(new URL(path, ROOT), 'utf8')]),
);
const README = document('README.md');

function document(path: string): string {
  const text = DOCUMENTS.get(path);
  if (text === undefined) throw new Error(`${path} is missing`);
  return text;
}

/** The fenced blocks of a document, in order. */
function blocks(text: string): Array<{ language: string; body: string }> {
  return [...text.matchAll(/```(\w*)\n([\s\S]*?)```/g)].map(([, language, body]) => ({ language: language ?? '', body: body ?? '' }));
}

/**
 * Each ```sh block that runs curl, with the ```json block that follows it: the documented answer.
 * These are run. A curl example that must not run against a bare `npm start` (it needs a store or
 * a credential that start lacks, or it destroys something) is followed by a ```text block instead:
 * it is shown, not run.
 */
function curlExamples(text: string): Array<{ command: string; expected: string }> {
  const all = blocks(text);
  return all.flatMap((block, index) => {
    const next = all[index + 1];
    return block.language === 'sh' && block.body.startsWith('curl ') && next?.language === 'json'
      ? [{ command: block.body, expected: next.body }]
      : [];
  });
}

/** Every curl example of the README and docs/, whichever document it is in. */
function allCurlCommands(): string[] {
  return [...DOCUMENTS.values()].flatMap((text) => curlExamples(text).map((example) => example.command));
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

/** A service as a fresh `npm start` gets it, for as long as the enclosing describe runs. */
function useFreshService(): () => ServiceProcess {
  let service: ServiceProcess | undefined;
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
  return () => {
    if (service === undefined) throw new Error('the service has not started');
    return service;
  };
}

/** Runs each example of a document in order, and compares its answer with the one shown. */
async function runExamples(text: string, service: ServiceProcess): Promise<void> {
  const host = new URL(service.baseUrl).host;
  const [documentedTimes, answeredTimes] = [timestampNamer(), timestampNamer()];
  for (const { command, expected } of curlExamples(text)) {
    const { stdout } = await execFileAsync('bash', ['-c', command.replaceAll('localhost:8080', host)]);
    const documented = JSON.parse(expected) as unknown;
    expect(answeredTimes(JSON.parse(stdout)), command).to.deep.equal(documentedTimes(documented));
  }
}

describe('README', () => {
  describe('the curl examples, run in order against a service started with no configuration', () => {
    const service = useFreshService();

    it('has examples for all four endpoints', () => {
      const commands = curlExamples(README).map((example) => example.command);
      for (const endpoint of ['createTable', 'insertData', 'readCellData', 'deleteTable']) {
        expect(commands.some((command) => command.includes(`localhost:8080/v1/local/${endpoint}`)), endpoint).to.equal(true);
      }
    });

    it('answer what the README shows', async () => {
      await runExamples(README, service());
    });

    it('matches paths case-insensitively, and names in them exactly, as it says', async () => {
      expect(README).to.contain('Paths are matched case-insensitively');
      const create = (path: string) =>
        fetch(new URL(path, service().baseUrl), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"tableName": "case-check", "columnFamily": "cf"}' });
      expect((await create('/V1/local/CreateTable')).status).to.equal(201);
      expect(((await (await create('/v1/LOCAL/createTable')).json()) as { code: string }).code).to.equal('INSTANCE_NOT_FOUND');
      const deleted = await fetch(new URL('/v1/local/deleteTable', service().baseUrl), { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: '{"tableList": ["case-check"]}' });
      expect(deleted.status).to.equal(200);
    });
  });

  it('shows the test and start commands', () => {
    expect(README).to.contain('npm ci && npm test');
    expect(README).to.contain('npm start');
  });

  it("names, as docs/architecture.md's test prerequisites do, each install script CI runs before the tests", () => {
    const scripts = [...new Set([...readFileSync(new URL('.ci/run', ROOT), 'utf8').matchAll(/bash (scripts\/install-[\w-]+\.sh)/g)].map(([, script = '']) => script))];
    expect(scripts).to.include.members(['scripts/install-redis.sh', 'scripts/install-chromium.sh', 'scripts/install-promtool.sh']);
    const architecture = document('docs/architecture.md');
    const start = architecture.indexOf('\n## Running the tests\n');
    const prerequisites = architecture.slice(start, architecture.indexOf('\n## ', start + 1));
    for (const script of scripts) {
      expect(README, `README.md: ${script}`).to.contain(`\`bash ${script}\``);
      expect(prerequisites, `docs/architecture.md: ${script}`).to.contain(`\`bash ${script}\``);
    }
  });
});

describe('the curl examples of docs/', () => {
  it('have an example of every v2 operation, in the README or docs/', () => {
    const commands = allCurlCommands().map((command) => command.replaceAll('\\\n', ' '));
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

  it('are each followed by the answer they give (json: run) or by a text block (shown, not run)', () => {
    for (const [path, text] of DOCUMENTS) {
      const all = blocks(text);
      for (const [index, block] of all.entries()) {
        if (block.language !== 'sh' || !block.body.startsWith('curl ')) continue;
        expect(all[index + 1]?.language, `${path}: ${block.body}`).to.be.oneOf(['json', 'text']);
      }
    }
  });

  for (const [path, text] of DOCUMENTS) {
    if (path === 'README.md' || curlExamples(text).length === 0) continue;
    describe(`${path}, run in order against a service started with no configuration`, () => {
      const service = useFreshService();

      it(`answer what ${path} shows`, async () => {
        await runExamples(text, service());
      });
    });
  }
});

describe('the reference tables of docs/', () => {
  it("docs/stores/README.md shows each store's capabilities and limits as its driver publishes them", () => {
    const section = document('docs/stores/README.md');
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

  it('docs/errors.md lists every error code with its status', () => {
    const errors = document('docs/errors.md');
    for (const code of ERROR_CODES) {
      expect(errors, code).to.match(new RegExp(`\\| \`${code}\` \\| ${PROBLEM_TYPES[code].status} \\|`));
    }
  });

  it('docs/configuration.md documents every configuration variable', () => {
    const configuration = document('docs/configuration.md');
    for (const variable of CONFIG_VARIABLES) {
      expect(configuration, variable).to.match(new RegExp(`^\\| \`${variable}\` \\|`, 'm'));
    }
  });
});
