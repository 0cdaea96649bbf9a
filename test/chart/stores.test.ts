import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.ts';
import { ApiClient } from '../support/api-client.ts';
import { container, environment, helmBinary, localEnvironment, type Manifest, notes, only, render, storesConfigMap } from '../support/helm.ts';
import { cleanEnv, runService } from '../support/service-process.ts';

const PACKAGE_FILE = new URL('../../package.json', import.meta.url).pathname;
const STORE_VARIABLES = ['DATA_STORE', 'INSTANCE_IDS', 'DATA_DIR', 'GOOGLE_CLOUD_PROJECT', 'BIGTABLE_EMULATOR_HOST', 'GOOGLE_APPLICATION_CREDENTIALS'];

function podSpec(manifests: readonly Manifest[]): Manifest {
  return only(manifests, 'Deployment')['spec'].template.spec as Manifest;
}

describe('the Helm chart with several stores (stores, defaultStore)', function () {
  this.timeout(120_000);
  let helm: string;
  let directory: string;

  before(async function () {
    helm = await helmBinary(this);
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-chart-stores-'));
  });
  after(() => rmSync(directory, { recursive: true, force: true }));

  it('renders the stores into STORES_FILE, mounted into the pod, which the service reads as written', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/stores-values.yaml'] });
    const env = environment(manifests);
    expect(env['STORES_FILE']).to.equal('/etc/kvcrud/stores/stores.yaml');
    for (const variable of STORE_VARIABLES) expect(env, variable).to.not.have.property(variable);

    const config = loadConfig(localEnvironment(manifests, directory, PACKAGE_FILE));
    expect(config.stores.default.name).to.equal('main');
    expect(config.stores.all.map(({ name, driver, instances, settings }) => ({ name, driver, instances, settings }))).to.deep.equal([
      { name: 'analytics', driver: 'bigtable', instances: ['events-prod'], settings: { projectId: 'analytics-project', credentialsFile: PACKAGE_FILE } },
      { name: 'local', driver: 'embedded', instances: ['local', 'scratch'], settings: { dataDir: '/var/lib/kvcrud/local' } },
      { name: 'main', driver: 'bigtable', instances: ['orders-prod', 'users-prod'], settings: { projectId: 'my-project' } },
    ]);
  });

  it("mounts each store's key file from its Secret, read-only, where its credentialsFile points, and keeps credentials out of the ConfigMap", async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/stores-values.yaml'] });
    const file = storesConfigMap(manifests, '/etc/kvcrud/stores/stores.yaml');
    const credentialsFile = (parse(file) as { stores: Record<string, { credentialsFile?: string }> }).stores['analytics']?.credentialsFile ?? '';
    expect(credentialsFile).to.equal('/var/run/secrets/kvcrud/stores/analytics/kvcrud-analytics-gcp/key.json');
    const mount = (container(manifests)['volumeMounts'] as Manifest[]).find((candidate) => candidate['mountPath'] === dirname(credentialsFile));
    expect(mount).to.include({ readOnly: true });
    const volume = (podSpec(manifests)['volumes'] as Manifest[]).find((candidate) => candidate['name'] === mount?.['name']);
    expect(volume?.['secret']).to.deep.equal({ secretName: 'kvcrud-analytics-gcp', defaultMode: 288, items: [{ key: 'key.json', path: 'key.json' }] });
    // The Workload Identity store (main) reads no key file; the chart's own credentials volume is not there.
    expect((podSpec(manifests)['volumes'] as Manifest[]).map((candidate) => candidate['name'])).to.not.include('gcp-credentials');
    expect(file).to.not.match(/existingSecret|BEGIN PRIVATE KEY/);
  });

  it('runs one pod when a store is embedded, every embedded store in its own directory of one volume', async () => {
    const manifests = await render(helm, {
      set: {
        stores: { a: { driver: 'embedded', instances: ['local'] }, b: { driver: 'embedded', instances: ['local'] } },
        defaultStore: 'a',
        'embedded.persistence.enabled': true,
      },
    });
    const deployment = only(manifests, 'Deployment');
    expect(deployment['spec'].replicas).to.equal(1);
    expect(deployment['spec'].strategy).to.deep.equal({ type: 'Recreate' });
    expect(manifests.filter((manifest) => manifest['kind'] === 'PersistentVolumeClaim')).to.have.length(1);
    expect(container(manifests)['volumeMounts']).to.deep.include({ name: 'data', mountPath: '/var/lib/kvcrud' });
    const config = loadConfig(localEnvironment(manifests, directory, PACKAGE_FILE));
    expect(config.stores.all.map((store) => store.settings)).to.deep.equal([{ dataDir: '/var/lib/kvcrud/a' }, { dataDir: '/var/lib/kvcrud/b' }]);
  });

  it('rolls Bigtable-only stores like the single Bigtable store: several pods, no data volume', async () => {
    const manifests = await render(helm, {
      set: { stores: { main: { driver: 'bigtable', projectId: 'my-project', instances: ['my-instance'] } }, replicaCount: 3 },
    });
    const deployment = only(manifests, 'Deployment');
    expect(deployment['spec'].replicas).to.equal(3);
    expect(deployment['spec'].strategy.type).to.equal('RollingUpdate');
    expect(manifests.map((manifest) => manifest['kind'])).to.not.include('PersistentVolumeClaim');
    expect((podSpec(manifests)['volumes'] as Manifest[]).map((volume) => volume['name'])).to.not.include('data');
    // One store needs no defaultStore.
    expect(loadConfig(localEnvironment(manifests, directory, PACKAGE_FILE)).stores.default.name).to.equal('main');
  });

  it('rolls the pods when the stores change, and only then (checksum/stores)', async () => {
    const checksum = async (set: Record<string, unknown>) =>
      only(await render(helm, { valuesFiles: ['ci/stores-values.yaml'], set }), 'Deployment')['spec'].template.metadata.annotations['checksum/stores'] as string;
    const base = await checksum({});
    expect(base).to.match(/^[0-9a-f]{64}$/);
    expect(await checksum({ 'stores.main.instances': ['orders-prod'] })).to.not.equal(base);
    expect(await checksum({ 'auth.apiKeys.keys': [{ name: 'a', sha256: 'ab'.repeat(32), role: 'reader', instances: ['main/*'] }] })).to.equal(base);
  });

  it('leaves the single-store install as it was: its variables, no STORES_FILE', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'] });
    expect(environment(manifests)).to.include({ DATA_STORE: 'bigtable', INSTANCE_IDS: 'my-instance', GOOGLE_CLOUD_PROJECT: 'my-project' });
    expect(environment(manifests)).to.not.have.property('STORES_FILE');
    expect(manifests.filter((manifest) => manifest['kind'] === 'ConfigMap').map((manifest) => manifest['metadata'].name)).to.not.include('kvcrud-stores');
    expect(only(manifests, 'Deployment')['spec'].template.metadata.annotations).to.not.have.property('checksum/stores');
  });

  it('lists every store in the install notes, with what it runs on', async () => {
    const text = await notes(helm, { valuesFiles: ['ci/stores-values.yaml'] });
    expect(text).to.contain('Data stores (STORES_FILE, from the ConfigMap kvcrud-stores); v1 serves main:');
    expect(text).to.contain('- analytics: bigtable, instances events-prod, project analytics-project, key file from the Secret kvcrud-analytics-gcp');
    expect(text).to.contain('- local: embedded, instances local, scratch, data in /var/lib/kvcrud/local');
    expect(text).to.contain('- main: bigtable, instances orders-prod, users-prod, project my-project, as kvcrud@my-project.iam.gserviceaccount.com (Workload Identity)');
  });

  it('gives a configuration the service serves: every rendered store, v1 on the default one', async () => {
    const manifests = await render(helm, {
      set: {
        stores: { main: { driver: 'embedded', instances: ['local'] }, archive: { driver: 'embedded', instances: ['old'] } },
        defaultStore: 'main',
        'auth.mode': 'none',
        'metrics.port': null,
      },
    });
    const env: Record<string, string> = { ...localEnvironment(manifests, directory, PACKAGE_FILE), PORT: '0' };
    // The data volume is the pod's; here a temporary directory stands in for it.
    const dataRoot = join(directory, 'data');
    const rendered = storesConfigMap(manifests, '/etc/kvcrud/stores/stores.yaml').replaceAll('/var/lib/kvcrud/', `${dataRoot}/`);
    writeFileSync(env['STORES_FILE'] ?? '', rendered);
    const service = await runService(cleanEnv(env));
    try {
      const line = JSON.parse(service.output[0] ?? '{}') as { stores?: Record<string, unknown> };
      expect(Object.keys(line.stores ?? {})).to.deep.equal(['archive', 'main']);
      const api = await ApiClient.connect(service.baseUrl);
      expect((await api.get('/readyz')).body).to.deep.equal({ status: 'ready' });
      expect((await api.post('/v1/local/createTable', { tableName: 't', columnFamily: 'cf' })).status).to.equal(201);
    } finally {
      expect(await service.stop()).to.equal(0);
    }
  });
});
