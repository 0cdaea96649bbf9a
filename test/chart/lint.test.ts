import { expect } from 'chai';
import { CHART_DIR, apiServerProblems, ciValuesFiles, helmBinary, render, runHelm, template } from '../support/helm.ts';

const STANDARD_LABELS = ['helm.sh/chart', 'app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/version', 'app.kubernetes.io/managed-by'];

describe('the Helm chart, linted and rendered', function () {
  this.timeout(60_000);
  let helm: string;

  before(async function () {
    helm = await helmBinary(this);
  });

  it('has lint variants for the main installs', () => {
    expect(ciValuesFiles()).to.include.members([
      'ci/default-values.yaml',
      'ci/workload-identity-values.yaml',
      'ci/existing-secret-values.yaml',
      'ci/embedded-values.yaml',
      'ci/production-values.yaml',
    ]);
  });

  for (const valuesFile of ciValuesFiles()) {
    describe(valuesFile, () => {
      it('passes helm lint --strict with no warning and no failed rule', async () => {
        const result = await runHelm(helm, ['lint', '--strict', CHART_DIR, '-f', `${CHART_DIR}${valuesFile}`]);
        const output = result.stdout + result.stderr;
        expect(result.code, output).to.equal(0);
        expect(output).to.contain('1 chart(s) linted, 0 chart(s) failed');
        expect(output).to.not.match(/\[(WARNING|ERROR)\]/);
        // Lint only logs a template's `fail` (validateValues); it must not have been called.
        expect(output).to.not.contain('funcMap fail');
      });

      it('renders valid YAML: named after the release, with the standard labels', async () => {
        const manifests = await render(helm, { valuesFiles: [valuesFile], release: 'shop' });
        expect(manifests.map((manifest) => manifest['kind'])).to.include.members(['ConfigMap', 'Deployment', 'Service']);
        for (const manifest of manifests) {
          const id = `${manifest['kind']} ${manifest['metadata']?.name}`;
          expect(manifest['apiVersion'], id).to.be.a('string');
          expect(manifest['metadata'].name, id).to.match(/^shop-kvcrud(-[a-z]+)*$|^kvcrud-gateway$/);
          expect(Object.keys(manifest['metadata'].labels ?? {}), id).to.include.members(STANDARD_LABELS);
        }
        expect(apiServerProblems(manifests)).to.deep.equal([]);
      });
    });
  }

  it('renders without the release name twice when the release is called kvcrud', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], release: 'kvcrud' });
    const names = manifests.map((manifest) => manifest['metadata'].name as string);
    expect(names).to.include('kvcrud-api-keys');
    expect(names.map((name) => name.replace(/-api-keys$/, ''))).to.deep.equal(names.map(() => 'kvcrud'));
  });

  it('refuses the bare defaults, naming the values a Bigtable install must set', async () => {
    const result = await template(helm);
    expect(result.code).to.not.equal(0);
    expect(result.stderr).to.contain('kvcrud: invalid values:');
    expect(result.stderr).to.contain('- gcp.projectId is required with dataStore=bigtable');
    expect(result.stderr).to.contain('- bigtable.instanceIds needs at least one instance with dataStore=bigtable');
  });
});
