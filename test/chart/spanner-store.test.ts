import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.ts';
import { container, environment, helmBinary, type Manifest, notes, only, render, storesConfigMap, template } from '../support/helm.ts';

const STORES_FILE = '/etc/kvcrud/stores/stores.yaml';

describe('the Helm chart with a Spanner store', function () {
  this.timeout(120_000);
  let helm: string;
  let directory: string;

  before(async function () {
    helm = await helmBinary(this);
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-chart-spanner-'));
  });
  after(() => rmSync(directory, { recursive: true, force: true }));

  it('renders the entry into STORES_FILE with the key file from its Secret, read-only, and no secret in the ConfigMap', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/spanner-store-values.yaml'] });
    const file = storesConfigMap(manifests, STORES_FILE);
    const entry = (parse(file) as { stores: Record<string, Record<string, unknown>> }).stores['ledger'];
    expect(entry).to.deep.equal({
      driver: 'spanner',
      instances: ['ledger', 'ledger_archive'],
      projectId: 'my-project',
      instance: 'kvcrud-prod',
      credentialsFile: '/var/run/secrets/kvcrud/stores/ledger/kvcrud-spanner-gcp/key.json',
    });
    const mount = (container(manifests)['volumeMounts'] as Manifest[]).find((candidate) => candidate['mountPath'] === dirname(String(entry?.['credentialsFile'])));
    expect(mount).to.include({ readOnly: true });
    const spec = only(manifests, 'Deployment')['spec'].template.spec as Manifest;
    const volume = (spec['volumes'] as Manifest[]).find((candidate) => candidate['name'] === mount?.['name']);
    expect(volume?.['secret']).to.deep.equal({ secretName: 'kvcrud-spanner-gcp', defaultMode: 288, items: [{ key: 'key.json', path: 'key.json' }] });
    expect(file).to.not.match(/existingSecret|BEGIN PRIVATE KEY/);
    // Nothing embedded: as many pods as asked for.
    expect(only(manifests, 'Deployment')['spec'].replicas).to.equal(3);
  });

  it('gives a STORES_FILE the service accepts as written, and against the emulator one without credentials', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/spanner-store-values.yaml'] });
    // The Secret's file exists only in the pod: a stand-in here.
    const key = join(directory, 'key.json');
    writeFileSync(key, '{}\n');
    const local = join(directory, 'stores.yaml');
    writeFileSync(local, storesConfigMap(manifests, STORES_FILE).replace(/^(\s*credentialsFile: ).*$/m, `$1${key}`));
    const ledger = loadConfig({ ...environment(manifests), STORES_FILE: local }).stores.all.find((store) => store.name === 'ledger');
    expect(ledger).to.deep.include({ driver: 'spanner', instances: ['ledger', 'ledger_archive'] });
    expect(ledger?.settings).to.deep.equal({ projectId: 'my-project', instance: 'kvcrud-prod', credentialsFile: key });

    const emulated = await render(helm, {
      set: { stores: { ledger: { driver: 'spanner', projectId: 'local-dev', instance: 'dev', emulatorHost: 'spanner-emulator:9010', instances: ['ledger'] } } },
    });
    writeFileSync(local, storesConfigMap(emulated, STORES_FILE));
    expect(loadConfig({ ...environment(emulated), STORES_FILE: local }).stores.default.settings).to.deep.equal({
      projectId: 'local-dev',
      instance: 'dev',
      emulatorHost: 'spanner-emulator:9010',
    });
  });

  it('passes coalesce: false of a Spanner or Bigtable entry to the service, and leaves it out unless set', async () => {
    const local = join(directory, 'coalesce.yaml');
    const manifests = await render(helm, {
      set: {
        stores: {
          ledger: { driver: 'spanner', projectId: 'local-dev', instance: 'dev', emulatorHost: 'spanner-emulator:9010', instances: ['ledger'], coalesce: false },
          wide: { driver: 'bigtable', projectId: 'local-dev', emulatorHost: 'bigtable-emulator:8086', instances: ['wide-1'], coalesce: false },
          plain: { driver: 'bigtable', projectId: 'local-dev', emulatorHost: 'bigtable-emulator:8086', instances: ['plain-1'] },
        },
        defaultStore: 'ledger',
      },
    });
    writeFileSync(local, storesConfigMap(manifests, STORES_FILE));
    const stores = loadConfig({ ...environment(manifests), STORES_FILE: local }).stores.all;
    const settings = (name: string) => stores.find((store) => store.name === name)?.settings;
    expect(settings('ledger')).to.include({ coalesce: false });
    expect(settings('wide')).to.include({ coalesce: false });
    expect(settings('plain')).to.not.have.property('coalesce');
    const refused = await template(helm, { set: { stores: { ledger: { driver: 'spanner', projectId: 'p-1', instance: 'dev', instances: ['ledger'], coalesce: 'no' } } } });
    expect(refused.code).to.not.equal(0);
    expect(refused.stderr).to.contain('coalesce');
  });

  it('describes the store in the install notes, naming the Secret but not its content', async () => {
    const text = await notes(helm, { valuesFiles: ['ci/spanner-store-values.yaml'] });
    expect(text).to.contain('- ledger: spanner, instances ledger, ledger_archive, project my-project, Spanner instance kvcrud-prod, key file from the Secret kvcrud-spanner-gcp');
  });

  it('refuses an entry without its project or instance, or with a key file and the emulator, naming the entry', async () => {
    const problems = async (ledger: Record<string, unknown>) => {
      const result = await template(helm, { set: { stores: { ledger: { driver: 'spanner', instances: ['ledger'], ...ledger } } } });
      expect(result.code).to.not.equal(0);
      return result.stderr;
    };
    const missing = await problems({});
    expect(missing).to.contain('stores.ledger.projectId is required with driver spanner (the project that holds the Spanner instance)');
    expect(missing).to.contain("stores.ledger.instance is required with driver spanner (the Spanner instance that holds the instances' databases)");
    expect(await problems({ projectId: 'my-project', instance: 'dev', emulatorHost: 'spanner-emulator:9010', credentials: { existingSecret: 'kvcrud-spanner-gcp' } })).to.contain(
      'stores.ledger.credentials.existingSecret is never read with stores.ledger.emulatorHost set: leave one empty',
    );
    // values.schema.json: a Spanner instance ID, database IDs (underscores allowed), no other driver's fields.
    const schema = await problems({ projectId: 'my-project', instance: 'Dev_1', url: 'redis://x:6379', instances: ['9ledger', 'ledger_archive'] });
    expect(schema).to.contain("at '/stores/ledger/instance': 'Dev_1' does not match pattern");
    expect(schema).to.contain("at '/stores/ledger/instances/0': '9ledger' does not match pattern");
    expect(schema).to.not.contain('/stores/ledger/instances/1');
    expect(schema).to.contain("additional properties 'url' not allowed");
  });
});
