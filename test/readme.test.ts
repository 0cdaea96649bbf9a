import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { CONFIG_VARIABLES } from '../src/config.ts';
import { PROBLEM_TYPES } from '../src/http/problems.ts';
import { ERROR_CODES } from '../src/service/errors.ts';
import { emulatorHost } from './support/emulator.ts';
import { runService, serviceEnv, type ServiceProcess } from './support/service-process.ts';
import { randomInstanceId } from './support/test-app.ts';

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

/** Timestamps are the time of the run; everything else must match exactly. */
function withoutTimestamps(json: unknown): unknown {
  return JSON.parse(JSON.stringify(json), (key, value: unknown) =>
    key === 'timestamp' && typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T[\d:.]+Z$/.test(value) ? '<timestamp>' : value,
  );
}

describe('README', () => {
  describe('the curl examples, run in order against a real service', () => {
    let service: ServiceProcess;
    const instance = randomInstanceId();

    before(async function () {
      service = await runService(serviceEnv(instance, emulatorHost(this)));
    });
    after(async () => {
      await service?.stop();
    });

    it('has examples for all four endpoints', () => {
      const commands = curlExamples().map((example) => example.command);
      for (const endpoint of ['createTable', 'insertData', 'readCellData', 'deleteTable']) {
        expect(commands.some((command) => command.includes(`/v1/my-instance/${endpoint}`)), endpoint).to.equal(true);
      }
    });

    it('answer what the README shows', async () => {
      const host = new URL(service.baseUrl).host;
      for (const { command, expected } of curlExamples()) {
        const runnable = command.replaceAll('localhost:8080', host).replaceAll('my-instance', instance);
        const { stdout } = await execFileAsync('bash', ['-c', runnable]);
        const documented = JSON.parse(expected.replaceAll('my-instance', instance)) as unknown;
        expect(withoutTimestamps(JSON.parse(stdout)), command).to.deep.equal(withoutTimestamps(documented));
      }
    });
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
