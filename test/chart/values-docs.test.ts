import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { type Pair, type YAMLMap, isMap, isScalar, parseDocument } from 'yaml';
import { CHART_DIR, helmBinary, runHelm } from '../support/helm.ts';

/** Kubernetes objects and free-form maps: documented as a whole, not key by key. */
const FREE_FORM = new Set(['podSecurityContext', 'securityContext', 'resources', 'annotations', 'labels', 'podAnnotations', 'podLabels', 'nodeSelector', 'affinity']);

interface Value {
  readonly path: string;
  /** The last paragraph of the comment above the key. */
  readonly comment: string;
  readonly value: unknown;
  /** A mapping with keys of its own (documented key by key), not a leaf. */
  readonly section: boolean;
}

/** Every key of values.yaml, in order, with its comment. */
function values(): Value[] {
  const document = parseDocument(readFileSync(`${CHART_DIR}values.yaml`, 'utf8'));
  const result: Value[] = [];
  const walk = (map: YAMLMap, prefix: string) => {
    map.items.forEach((pair: Pair, index) => {
      const key = isScalar(pair.key) ? String(pair.key.value) : '';
      const path = prefix === '' ? key : `${prefix}.${key}`;
      // The yaml parser gives the comment above a mapping's first key to the mapping itself.
      const raw = (isScalar(pair.key) ? pair.key.commentBefore : undefined) ?? (index === 0 ? map.commentBefore : undefined) ?? '';
      const comment = raw.split(/\n\s*\n/).at(-1)?.replace(/\s+/g, ' ').trim() ?? '';
      const section = isMap(pair.value) && pair.value.items.length > 0 && !FREE_FORM.has(key);
      result.push({ path, comment, value: (pair.value as { toJSON(): unknown } | null)?.toJSON() ?? null, section });
      if (section) walk(pair.value as YAMLMap, path);
    });
  };
  walk(document.contents as YAMLMap, '');
  return result;
}

const CHART_README = readFileSync(`${CHART_DIR}README.md`, 'utf8');
const KUBERNETES_DOC = readFileSync(new URL('../../docs/kubernetes.md', import.meta.url), 'utf8');

/** The README's value table rows: path -> default cell. */
function documentedValues(): Map<string, string> {
  return new Map([...CHART_README.matchAll(/^\| `([A-Za-z0-9.]+)` \| ([^|]+) \|/gm)].map(([, path = '', cell = '']) => [path, cell.trim()]));
}

/**
 * Each `helm install` command of a README, joined across its continuation lines, after the
 * variables its block sets first (e.g. `DIGEST=$(...)`), so it runs as a reader would run it.
 */
function helmInstallCommands(readme: string): string[] {
  return [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap(([, block = '']) => {
    const lines = block.replace(/\\\n\s*/g, ' ').split('\n');
    const variables = lines.filter((line) => /^[A-Z_]+=/.test(line));
    return lines.filter((line) => line.startsWith('helm install ')).map((line) => [...variables, line].join('\n'));
  });
}

describe('the Helm chart documentation', () => {
  it('documents every key in values.yaml with a comment starting with its name', () => {
    for (const { path, comment } of values()) {
      const name = path.split('.').at(-1) ?? '';
      expect(comment, path).to.match(new RegExp(`^${name}\\b`));
    }
  });

  it('lists every value in the chart README with its default', () => {
    const documented = documentedValues();
    const leaves = values().filter((value) => !value.section && !value.path.split('.').slice(0, -1).some((part) => FREE_FORM.has(part)));
    for (const { path, value } of leaves) {
      const cell = documented.get(path);
      expect(cell, `README row for ${path}`).to.be.a('string');
      const objectDefault = typeof value === 'object' && value !== null && Object.keys(value).length > 0 && FREE_FORM.has(path);
      expect(cell, path).to.equal(objectDefault ? '(see values.yaml)' : `\`${JSON.stringify(value)}\``);
    }
    expect([...documented.keys()].sort(), 'README rows for values that do not exist').to.deep.equal(leaves.map((leaf) => leaf.path).sort());
  });

  it('deploys the version of the service in package.json by default (appVersion)', () => {
    const chart = parseDocument(readFileSync(`${CHART_DIR}Chart.yaml`, 'utf8')).toJS() as { appVersion: string };
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(chart.appVersion).to.equal(pkg.version);
  });

  describe('the helm install commands of the READMEs', function () {
    this.timeout(60_000);
    let helm: string;

    before(async function () {
      helm = await helmBinary(this);
    });

    for (const [readme, text] of [['docs/kubernetes.md', KUBERNETES_DOC], ['charts/kvcrud/README.md', CHART_README]] as const) {
      it(`render as shown in ${readme}`, async () => {
        const commands = helmInstallCommands(text);
        expect(commands, readme).to.not.deep.equal([]);
        for (const command of commands) {
          // The same arguments through `helm template`, which needs no cluster; the chart path is the repository's.
          const script = command.replace(/^helm install /m, 'exec "$HELM" template ').replace(' --create-namespace', '').replace(' charts/kvcrud ', ` ${CHART_DIR} `);
          const result = await runHelm('bash', ['-c', script.replace('"$HELM"', `'${helm}'`)]);
          expect(result.code, `${command}\n${result.stderr}`).to.equal(0);
          expect(result.stdout, command).to.contain('kind: Deployment');
        }
      });
    }
  });
});
