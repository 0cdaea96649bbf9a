import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.ts';
import { container, environment, helmBinary, type Manifest, notes, only, render, storesConfigMap, template } from '../support/helm.ts';

const STORES_FILE = '/etc/kvcrud/stores/stores.yaml';

describe('the Helm chart with a Redis store', function () {
  this.timeout(120_000);
  let helm: string;
  let directory: string;

  before(async function () {
    helm = await helmBinary(this);
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-chart-redis-'));
  });
  after(() => rmSync(directory, { recursive: true, force: true }));

  it('renders the entry into STORES_FILE with the AUTH string and the CA as files from their Secrets, read-only, and no secret in the ConfigMap', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/redis-store-values.yaml'] });
    const file = storesConfigMap(manifests, STORES_FILE);
    const entry = (parse(file) as { stores: Record<string, Record<string, unknown>> }).stores['cache'];
    expect(entry).to.deep.equal({
      driver: 'redis',
      instances: ['sessions', 'carts'],
      url: 'rediss://10.0.0.3:6378',
      authStringFile: '/var/run/secrets/kvcrud/stores/cache/kvcrud-redis-auth/auth',
      caFile: '/var/run/secrets/kvcrud/stores/cache/kvcrud-redis-ca/server-ca.pem',
    });
    const spec = only(manifests, 'Deployment')['spec'].template.spec as Manifest;
    for (const [path, secretName, key] of [
      [entry?.['authStringFile'], 'kvcrud-redis-auth', 'auth'],
      [entry?.['caFile'], 'kvcrud-redis-ca', 'server-ca.pem'],
    ] as Array<[string, string, string]>) {
      const mount = (container(manifests)['volumeMounts'] as Manifest[]).find((candidate) => candidate['mountPath'] === dirname(path));
      expect(mount, path).to.include({ readOnly: true });
      const volume = (spec['volumes'] as Manifest[]).find((candidate) => candidate['name'] === mount?.['name']);
      expect(volume?.['secret']).to.deep.equal({ secretName, defaultMode: 288, items: [{ key, path: key }] });
    }
    expect(file).to.not.match(/existingSecret|password/);
    // Nothing embedded: as many pods as asked for.
    expect(only(manifests, 'Deployment')['spec'].replicas).to.equal(3);
  });

  it('gives a STORES_FILE the service accepts as written', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/redis-store-values.yaml'], set: { 'stores.cache.cluster': true } });
    // The Secrets' files exist only in the pod: stand-ins here.
    const auth = join(directory, 'auth');
    const ca = join(directory, 'ca.pem');
    writeFileSync(auth, 'an-auth-string\n');
    writeFileSync(ca, '-----BEGIN CERTIFICATE-----\n');
    const local = join(directory, 'stores.yaml');
    writeFileSync(
      local,
      storesConfigMap(manifests, STORES_FILE)
        .replace(/^(\s*authStringFile: ).*$/m, `$1${auth}`)
        .replace(/^(\s*caFile: ).*$/m, `$1${ca}`),
    );
    const config = loadConfig({ ...environment(manifests), STORES_FILE: local });
    const cache = config.stores.all.find((store) => store.name === 'cache');
    expect(cache).to.deep.include({ driver: 'redis', instances: ['sessions', 'carts'] });
    expect(cache?.settings).to.deep.equal({ url: 'rediss://10.0.0.3:6378', cluster: true, authStringFile: auth, caFile: ca });
  });

  it('describes the store in the install notes, naming the Secrets but not their content', async () => {
    const text = await notes(helm, { valuesFiles: ['ci/redis-store-values.yaml'] });
    expect(text).to.contain(
      '- cache: redis, instances sessions, carts, Redis at rediss://10.0.0.3:6378, AUTH string from the Secret kvcrud-redis-auth, CA from the Secret kvcrud-redis-ca',
    );
  });

  it('refuses an entry without a url, with a password in it, a CA without TLS, or a database on a cluster, naming the entry', async () => {
    const problems = async (cache: Record<string, unknown>) => {
      const result = await template(helm, { set: { stores: { cache: { driver: 'redis', instances: ['sessions'], ...cache } } } });
      expect(result.code).to.not.equal(0);
      return result.stderr;
    };
    expect(await problems({})).to.contain('stores.cache.url is required with driver redis (redis://host:port or rediss://host:port)');
    expect(await problems({ url: 'redis://:hunter2@10.0.0.3:6379' })).to.contain(
      'stores.cache.url must not hold a password: put the AUTH string in a Secret and name it in stores.cache.authString.existingSecret',
    );
    expect(await problems({ url: 'http://10.0.0.3:6379' })).to.contain('stores.cache.url must be redis://host:port or rediss://host:port');
    expect(await problems({ url: 'redis://10.0.0.3:6379', ca: { existingSecret: 'ca' } })).to.contain(
      'stores.cache.ca needs a rediss:// url: the CA is for TLS (in-transit encryption)',
    );
    expect(await problems({ url: 'redis://10.0.0.3:6379/2', cluster: true })).to.contain(
      'stores.cache.url of a cluster cannot name a database: a Redis Cluster has only database 0',
    );
    expect(await problems({ url: 'redis://10.0.0.3:6379', password: 'x' })).to.match(/password/);
  });
});
