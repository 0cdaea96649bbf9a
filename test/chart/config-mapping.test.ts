import { expect } from 'chai';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ciValuesFiles, container, environment, helmBinary, localEnvironment, type Manifest, only, render, serviceConfigMap } from '../support/helm.ts';

const CREDENTIALS_DIR = '/var/run/secrets/kvcrud/gcp';
const PACKAGE_FILE = new URL('../../package.json', import.meta.url).pathname;


function volumes(manifests: readonly Manifest[]): Manifest[] {
  return only(manifests, 'Deployment')['spec'].template.spec.volumes as Manifest[];
}

describe('the Helm chart maps values to the service configuration', function () {
  this.timeout(60_000);
  let helm: string;

  before(async function () {
    helm = await helmBinary(this);
  });

  it('passes the project, the instances and the limits to the service', async () => {
    const manifests = await render(helm, {
      valuesFiles: ['ci/default-values.yaml'],
      set: {
        'bigtable.instanceIds': ['orders-prod', 'users-prod'],
        config: {
          maxBodyBytes: 2048,
          storeTimeoutMs: 750,
          maxInflight: 64,
          maxInflightPerCaller: 16,
          maxInflightUnauthenticated: 8,
          minBodyBytesPerSecond: 4096,
          rateLimitPerSecond: 20,
          trustedProxies: ['loopback', '10.8.0.0/14'],
        },
        'shutdown.timeoutMs': 12_000,
      },
    });
    expect(serviceConfigMap(manifests)['data']).to.deep.equal({
      DATA_STORE: 'bigtable',
      PORT: '8080',
      GOOGLE_CLOUD_PROJECT: 'my-project',
      INSTANCE_IDS: 'orders-prod,users-prod',
      MAX_BODY_BYTES: '2048',
      STORE_TIMEOUT_MS: '750',
      MAX_INFLIGHT: '64',
      MAX_INFLIGHT_PER_CALLER: '16',
      MAX_INFLIGHT_UNAUTHENTICATED: '8',
      TRUSTED_PROXIES: 'loopback,10.8.0.0/14',
      MIN_BODY_BYTES_PER_SECOND: '4096',
      RATE_LIMIT_PER_SECOND: '20',
      V1_MAX_VERSIONS: '1',
      SHUTDOWN_TIMEOUT_MS: '12000',
      LOG_LEVEL: 'info',
      METRICS_PORT: '9090',
      AUTH_MODE: 'apikey',
      AUTH_PROTECT_DOCS: 'false',
      AUTH_API_KEYS_FILE: '/etc/kvcrud/api-keys/keys.json',
    });
    expect(container(manifests)['envFrom']).to.deep.equal([{ configMapRef: { name: 'kvcrud' } }]);
    // The service itself accepts what the chart gives it.
    const config = loadConfig(environment(manifests));
    expect(config).to.deep.include({
      port: 8080,
      maxBodyBytes: 2048,
      storeTimeoutMs: 750,
      maxInflight: 64,
      maxInflightPerCaller: 16,
      maxInflightUnauthenticated: 8,
      minBodyBytesPerSecond: 4096,
      rateLimitPerSecond: 20,
      trustedProxies: ['loopback', '10.8.0.0/14'],
      shutdownTimeoutMs: 12_000,
      instanceIds: ['orders-prod', 'users-prod'],
      logLevel: 'info',
      metricsPort: 9090,
    });
    expect(config.stores.default).to.deep.include({ driver: 'bigtable', settings: { projectId: 'my-project' } });
  });

  it('lets each pod take 256 requests at once, half of them from one caller, with no rate limit, by default', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'] });
    expect(environment(manifests))
      .to.include({ MAX_INFLIGHT: '256', MAX_INFLIGHT_UNAUTHENTICATED: '16', MIN_BODY_BYTES_PER_SECOND: '16384' })
      .and.not.have.any.keys('RATE_LIMIT_PER_SECOND', 'MAX_INFLIGHT_PER_CALLER', 'TRUSTED_PROXIES');
    expect(loadConfig(environment(manifests))).to.deep.include({
      maxInflight: 256,
      maxInflightPerCaller: 128,
      maxInflightUnauthenticated: 16,
      minBodyBytesPerSecond: 16384,
      rateLimitPerSecond: undefined,
    });
  });

  it('turns the minimum body rate off with 0', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'config.minBodyBytesPerSecond': 0 } });
    expect(loadConfig(environment(manifests)).minBodyBytesPerSecond).to.equal(0);
  });

  it('sets only variables the service reads', async () => {
    for (const valuesFile of ciValuesFiles()) {
      const manifests = await render(helm, { valuesFiles: [valuesFile] });
      const chartOwn = Object.keys(serviceConfigMap(manifests)['data'] as object);
      expect(CONFIG_VARIABLES, valuesFile).to.include.members(chartOwn);
    }
  });

  it('gives every variant a configuration the service accepts', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'kvcrud-chart-'));
    try {
      for (const valuesFile of ciValuesFiles()) {
        // Key files exist only in the pod; any readable file stands in for them here.
        const env = localEnvironment(await render(helm, { valuesFiles: [valuesFile] }), directory, PACKAGE_FILE);
        expect(() => loadConfig(env), valuesFile).to.not.throw();
      }
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it('points the service at a Bigtable emulator', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'bigtable.emulatorHost': 'bigtable-emulator:8086' } });
    expect(environment(manifests)).to.include({ BIGTABLE_EMULATOR_HOST: 'bigtable-emulator:8086' });
    expect(loadConfig(environment(manifests)).stores.default).to.deep.include({
      driver: 'bigtable',
      settings: { projectId: 'my-project', emulatorHost: 'bigtable-emulator:8086' },
    });
  });

  it('mounts credentials.existingSecret read-only and points GOOGLE_APPLICATION_CREDENTIALS at the key', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/existing-secret-values.yaml'] });
    expect(volumes(manifests)).to.deep.include({
      name: 'gcp-credentials',
      secret: { secretName: 'kvcrud-gcp', defaultMode: 0o440, items: [{ key: 'key.json', path: 'key.json' }] },
    });
    expect(container(manifests)['volumeMounts']).to.deep.include({ name: 'gcp-credentials', mountPath: CREDENTIALS_DIR, readOnly: true });
    expect(environment(manifests)['GOOGLE_APPLICATION_CREDENTIALS']).to.equal(`${CREDENTIALS_DIR}/key.json`);
    // No Workload Identity on the side.
    expect(only(manifests, 'ServiceAccount')['metadata'].annotations).to.equal(undefined);
  });

  it('uses GKE Workload Identity through the ServiceAccount annotation, with no secret and no key file', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/workload-identity-values.yaml'] });
    const serviceAccount = only(manifests, 'ServiceAccount');
    expect(serviceAccount['metadata'].annotations).to.deep.equal({ 'iam.gke.io/gcp-service-account': 'kvcrud@my-project.iam.gserviceaccount.com' });
    expect(only(manifests, 'Deployment')['spec'].template.spec.serviceAccountName).to.equal(serviceAccount['metadata'].name);
    expect(environment(manifests)).to.not.have.property('GOOGLE_APPLICATION_CREDENTIALS');
    expect(volumes(manifests).map((volume) => volume['name'])).to.not.include('gcp-credentials');
    // The only Secret is the API keys file of the default auth.mode.
    expect(manifests.filter((manifest) => manifest['kind'] === 'Secret').map((secret) => secret['metadata'].name)).to.deep.equal(['kvcrud-api-keys']);
  });

  it('runs the embedded store as one pod, replaced not rolled, with its data on a kept PersistentVolumeClaim', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/embedded-values.yaml'] });
    expect(serviceConfigMap(manifests)['data']).to.deep.include({
      DATA_STORE: 'embedded',
      DATA_DIR: '/var/lib/kvcrud',
      INSTANCE_IDS: 'local-data',
      PORT: '8080',
      MAX_BODY_BYTES: '10485760',
      STORE_TIMEOUT_MS: '5000',
      SHUTDOWN_TIMEOUT_MS: '25000',
    });
    const deployment = only(manifests, 'Deployment');
    expect(deployment['spec'].replicas).to.equal(1);
    expect(deployment['spec'].strategy).to.deep.equal({ type: 'Recreate' });
    const claim = only(manifests, 'PersistentVolumeClaim');
    expect(claim['metadata'].name).to.equal('kvcrud-data');
    expect(claim['metadata'].annotations).to.deep.equal({ 'helm.sh/resource-policy': 'keep' });
    expect(claim['spec']).to.deep.equal({ accessModes: ['ReadWriteOnce'], storageClassName: 'standard-rwo', resources: { requests: { storage: '5Gi' } } });
    expect(volumes(manifests)).to.deep.include({ name: 'data', persistentVolumeClaim: { claimName: 'kvcrud-data' } });
    expect(container(manifests)['volumeMounts']).to.deep.include({ name: 'data', mountPath: '/var/lib/kvcrud' });
    expect(manifests.map((manifest) => manifest['kind'])).to.not.include('HorizontalPodAutoscaler');
  });

  it('uses an existing claim, or an emptyDir without persistence, for the embedded store', async () => {
    const existing = await render(helm, { valuesFiles: ['ci/embedded-existing-claim-values.yaml'] });
    expect(existing.map((manifest) => manifest['kind'])).to.not.include('PersistentVolumeClaim');
    expect(volumes(existing)).to.deep.include({ name: 'data', persistentVolumeClaim: { claimName: 'kvcrud-data' } });
    expect(container(existing)['volumeMounts']).to.deep.include({ name: 'data', mountPath: '/data' });
    expect(environment(existing)['DATA_DIR']).to.equal('/data');

    const ephemeral = await render(helm, { set: { dataStore: 'embedded' } });
    expect(volumes(ephemeral)).to.deep.include({ name: 'data', emptyDir: {} });
    expect(environment(ephemeral)).to.not.have.property('INSTANCE_IDS');
    expect(environment(ephemeral)).to.not.have.property('GOOGLE_CLOUD_PROJECT');
  });

  it('rolls the Bigtable pods one new pod at a time, never below the wanted count', async () => {
    const deployment = only(await render(helm, { valuesFiles: ['ci/workload-identity-values.yaml'] }), 'Deployment');
    expect(deployment['spec'].replicas).to.equal(3);
    expect(deployment['spec'].strategy).to.deep.equal({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: '25%' } });
  });

  it('merges extraEnv over its own env by name: an entry of the same name takes its place, new ones follow', async () => {
    const manifests = await render(helm, {
      valuesFiles: ['ci/default-values.yaml'],
      set: {
        nodeOptions: '--trace-warnings',
        extraEnv: [{ name: 'AUTH_KEY', valueFrom: { secretKeyRef: { name: 'keys', key: 'k' } } }, { name: 'NODE_OPTIONS', value: '--max-old-space-size=384' }],
      },
    });
    expect(container(manifests)['env']).to.deep.equal([
      { name: 'NODE_OPTIONS', value: '--max-old-space-size=384' },
      { name: 'AUTH_KEY', valueFrom: { secretKeyRef: { name: 'keys', key: 'k' } } },
    ]);
  });

  it('renders no env name twice for any values file in ci/ (server-side apply refuses duplicates)', async () => {
    for (const file of ciValuesFiles()) {
      const names = ((container(await render(helm, { valuesFiles: [file] }))['env'] ?? []) as Array<{ name: string }>).map((entry) => entry.name);
      expect(new Set(names).size, `${file}: ${names.join(', ')}`).to.equal(names.length);
    }
  });

  it('leaves heap sizing to the service by default (no NODE_OPTIONS), which sizes it from the memory limit', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'] });
    expect(JSON.stringify(container(manifests)['env'] ?? [])).to.not.contain('NODE_OPTIONS');
    const sized = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { nodeOptions: '--max-old-space-size=300' } });
    expect(container(sized)['env']).to.deep.equal([{ name: 'NODE_OPTIONS', value: '--max-old-space-size=300' }]);
  });

  it('rolls the pods when the configuration changes, and only then (checksum/config)', async () => {
    const checksum = async (set: Record<string, unknown>) =>
      only(await render(helm, { valuesFiles: ['ci/default-values.yaml'], set }), 'Deployment')['spec'].template.metadata.annotations['checksum/config'] as string;
    const base = await checksum({});
    expect(base).to.match(/^[0-9a-f]{64}$/);
    expect(await checksum({ 'config.storeTimeoutMs': 6000 })).to.not.equal(base);
    expect(await checksum({ 'bigtable.instanceIds': ['other-instance'] })).to.not.equal(base);
    expect(await checksum({ podAnnotations: { team: 'storage' } })).to.equal(base);
  });

  it('pulls the appVersion tag by default, an explicit tag, or a pinned digest', async () => {
    const image = async (set: Record<string, unknown>) => container(await render(helm, { valuesFiles: ['ci/default-values.yaml'], set }))['image'] as string;
    const { version } = (await import('../../package.json', { with: { type: 'json' } })).default;
    expect(await image({})).to.equal(`kvcrud:${version}`);
    expect(await image({ image: { repository: 'us-docker.pkg.dev/p/r/kvcrud', tag: '1.2.3' } })).to.equal('us-docker.pkg.dev/p/r/kvcrud:1.2.3');
    const digest = `sha256:${'a'.repeat(64)}`;
    expect(await image({ image: { tag: '1.2.3', digest } })).to.equal(`kvcrud@${digest}`);
  });
});
