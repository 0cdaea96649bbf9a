import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Ignore } from '@balena/dockerignore';
import { expect } from 'chai';
import { DockerfileParser, type Instruction, ModifiableInstruction } from 'dockerfile-ast';
import { ValidationSeverity, type ValidatorSettings, validate } from 'dockerfile-utils';
import { loadConfig } from '../../src/config.ts';

// Docker's own .dockerignore rules. The package is CommonJS (`module.exports = factory`) but its
// types declare a default export, which TypeScript then resolves to the module object.
const dockerignore = createRequire(import.meta.url)('@balena/dockerignore') as () => Ignore;

const ROOT = new URL('../../', import.meta.url);
const DOCKERFILE = readFileSync(new URL('Dockerfile', ROOT), 'utf8');
const PACKAGE = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { scripts: Record<string, string> };
const LOCK = JSON.parse(readFileSync(new URL('package-lock.json', ROOT), 'utf8')) as { packages: Record<string, { version: string }> };

interface Stage {
  readonly name: string | null;
  readonly image: string;
  readonly instructions: Instruction[];
}

/** The Dockerfile's build stages, each with its own instructions (FROM first). */
function stages(): Stage[] {
  const result: Array<{ name: string | null; image: string; instructions: Instruction[] }> = [];
  for (const instruction of DockerfileParser.parse(DOCKERFILE).getInstructions()) {
    if (instruction.getKeyword() === 'FROM') {
      const [image = '', , name = null] = (instruction.getArgumentsContent() ?? '').split(/\s+/);
      result.push({ name, image, instructions: [] });
    }
    result.at(-1)?.instructions.push(instruction);
  }
  return result;
}

/** The arguments of each `keyword` instruction of the stage, flags (`--from=build`) first. */
function argumentsOf(stage: Stage, keyword: string): string[] {
  return stage.instructions
    .filter((instruction) => instruction.getKeyword() === keyword)
    .map((instruction) => {
      const flags = instruction instanceof ModifiableInstruction ? instruction.getFlags().map((flag) => `--${flag.getName()}=${flag.getValue()}`) : [];
      return [...flags, instruction.getArgumentsContent() ?? ''].join(' ');
    });
}

// Every check the linter can be told about, as an error (some are only warnings by default).
const STRICT: ValidatorSettings = {
  deprecatedMaintainer: ValidationSeverity.ERROR,
  directiveCasing: ValidationSeverity.ERROR,
  emptyContinuationLine: ValidationSeverity.ERROR,
  instructionCasing: ValidationSeverity.ERROR,
  instructionCmdMultiple: ValidationSeverity.ERROR,
  instructionEntrypointMultiple: ValidationSeverity.ERROR,
  instructionHealthcheckMultiple: ValidationSeverity.ERROR,
  instructionJSONInSingleQuotes: ValidationSeverity.ERROR,
  instructionWorkdirRelative: ValidationSeverity.ERROR,
};

describe('the Dockerfile', () => {
  const all = stages();
  const runtime = all.at(-1) as Stage;

  it('passes the Dockerfile linter (dockerfile-utils) with every check on', () => {
    expect(validate(DOCKERFILE, STRICT).map((problem) => `line ${problem.range.start.line + 1}: ${JSON.stringify(problem.message)}`)).to.deep.equal([]);
    // The linter does find problems when there are some.
    expect(validate('from node:24\ncmd ["node", \'x\']\nWORKDIR app\n', STRICT)).to.have.length.of.at.least(3);
  });

  it('builds in stages: compile and trace the runtime files, then a runtime of only those', () => {
    expect(all.map((stage) => stage.name)).to.deep.equal(['build', null]);
    const build = argumentsOf(all[0] as Stage, 'RUN').join('\n');
    expect(build).to.match(/\btsc -p tsconfig\.build\.json\b/);
    expect(build).to.match(/\bnode scripts\/trace-runtime\.ts \/runtime\b/);
    // The runtime stage installs and compiles nothing; it only copies the traced files.
    expect(argumentsOf(runtime, 'RUN')).to.deep.equal([]);
    expect(argumentsOf(runtime, 'COPY')).to.deep.equal(['--from=build /runtime ./']);
  });

  it('pins every stage to the exact Node release the tests run on', () => {
    const testedNode = LOCK.packages['node_modules/node']?.version ?? '';
    expect(testedNode).to.match(/^24\.\d+\.\d+$/);
    for (const stage of all) {
      expect(stage.image, stage.name ?? 'runtime').to.match(/^node:(\d+\.\d+\.\d+)-[a-z]+-slim(@sha256:[0-9a-f]{64})?$/);
      expect(stage.image.split(/[:-]/)[1], stage.name ?? 'runtime').to.equal(testedNode);
    }
  });

  it('runs as a non-root user given by number', () => {
    const [user] = argumentsOf(runtime, 'USER');
    expect(user).to.match(/^[1-9]\d*:[1-9]\d*$/);
  });

  it('starts with the command `npm start` runs in production, in exec form', () => {
    // `npm start` builds, then runs `npm run serve`: one command, in package.json.
    expect(PACKAGE.scripts['start']).to.match(/&& npm run serve\b/);
    const cmds = argumentsOf(runtime, 'CMD');
    expect(cmds).to.have.length(1);
    const command = JSON.parse(cmds[0] ?? '') as unknown;
    expect(command, 'exec form: Node is PID 1 and gets the signals').to.be.an('array');
    expect(command).to.deep.equal(PACKAGE.scripts['serve']?.split(' '));
    expect(argumentsOf(runtime, 'ENTRYPOINT')).to.deep.equal([]);
    expect(argumentsOf(runtime, 'ENV')).to.include('NODE_ENV=production');
  });

  it('exposes the port the service listens on by default', () => {
    expect(argumentsOf(runtime, 'EXPOSE')).to.deep.equal([String(loadConfig({ GOOGLE_CLOUD_PROJECT: 'p-x-y', INSTANCE_IDS: 'inst-a' }).port)]);
  });
});

describe('the .dockerignore', () => {
  const ignore = dockerignore().add(readFileSync(new URL('.dockerignore', ROOT), 'utf8').split('\n'));
  const tracked = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((file) => file !== '');

  it('sends only the sources and the files the build reads', () => {
    const context = tracked.filter((file) => !ignore.ignores(file));
    const outside = context.filter((file) => !file.startsWith('src/'));
    expect(outside.sort()).to.deep.equal(['package-lock.json', 'package.json', 'scripts/trace-runtime.ts', 'tsconfig.build.json', 'tsconfig.json']);
    expect(context).to.include('src/index.ts');
  });

  it('keeps out tests, docs, charts, node_modules and build output', () => {
    for (const file of ['test/readme.test.ts', 'README.md', 'DEVELOPERS.md', 'charts/kvcrud/Chart.yaml', 'node_modules/koa/package.json', 'dist/index.js', '.git/HEAD']) {
      expect(ignore.ignores(file), file).to.equal(true);
    }
  });

  it('holds every file the Dockerfile copies from the context', () => {
    for (const stage of stages()) {
      for (const copy of argumentsOf(stage, 'COPY').filter((args) => !args.startsWith('--'))) {
        const sources = copy.split(/\s+/).slice(0, -1);
        for (const source of sources) {
          const path = source.replace(/\/$/, '');
          const inContext = tracked.some((file) => (file === path || file.startsWith(`${path}/`)) && !ignore.ignores(file));
          expect(inContext, `COPY ${source}`).to.equal(true);
        }
      }
    }
  });
});
