import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { keysFile, newApiKey } from '../support/access-files.ts';
import { container, helmBinary, type Manifest, notes, only, render, template } from '../support/helm.ts';
import { MONITORING_VALUES } from '../support/monitoring.ts';
import { type ServiceProcess, cleanEnv, runService } from '../support/service-process.ts';

/** The helm test pod of the manifests. */
function testPod(manifests: readonly Manifest[]): Manifest {
  const pods = manifests.filter((manifest) => manifest['kind'] === 'Pod');
  if (pods.length !== 1) throw new Error(`expected one Pod, found ${pods.length}`);
  return pods[0] as Manifest;
}

/** Whether a label selector (matchLabels, or a Service's selector) selects these labels. */
function selects(selector: Readonly<Record<string, string>>, labels: Readonly<Record<string, string>>): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

/** A port nothing listens on: one the system just gave out and took back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the test pod's command as the kubelet would, with the pod's env: its secretKeyRef resolved
 * from `secrets`, and KVCRUD_URL, the Service's address in the cluster, replaced by `baseUrl`
 * (no cluster DNS here). The image's `node` is this Node.js.
 */
function runTestPod(pod: Manifest, baseUrl: string, secrets: Readonly<Record<string, string>>): Promise<Run> {
  const [main] = pod['spec'].containers as Manifest[];
  const env: Record<string, string> = {};
  for (const entry of (main?.['env'] ?? []) as Manifest[]) {
    const ref = entry['valueFrom']?.secretKeyRef as { name: string; key: string } | undefined;
    env[entry['name'] as string] = ref === undefined ? String(entry['value']) : (secrets[`${ref.name}/${ref.key}`] ?? '');
  }
  env['KVCRUD_URL'] = baseUrl;
  const [command, ...args] = main?.['command'] as string[];
  expect(command).to.equal('node');
  return new Promise((resolve) => {
    execFile(process.execPath, args, { env: cleanEnv(env), timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr });
    });
  });
}

describe('the Helm chart test (helm test)', function () {
  this.timeout(60_000);
  let helm: string;

  before(async function () {
    helm = await helmBinary(this);
  });

  it('is a test hook pod as locked down as the release pods, selected by none of the release selectors', async () => {
    const manifests = await render(helm, { valuesFiles: [MONITORING_VALUES], release: 'shop' });
    const pod = testPod(manifests);
    const deployment = only(manifests, 'Deployment')['spec'].template.spec;
    expect(pod['metadata'].name).to.equal('shop-kvcrud-test');
    expect(pod['metadata'].annotations).to.deep.equal({ 'helm.sh/hook': 'test', 'helm.sh/hook-delete-policy': 'before-hook-creation' });
    expect(pod['spec']).to.deep.include({ restartPolicy: 'Never', automountServiceAccountToken: false, securityContext: deployment.securityContext });
    const [main] = pod['spec'].containers as Manifest[];
    expect(main?.['securityContext']).to.deep.equal(container(manifests)['securityContext']);
    expect(main?.['image']).to.equal(container(manifests)['image']);
    expect(main?.['resources']).to.deep.equal({ requests: { cpu: '10m', memory: '64Mi' }, limits: { memory: '128Mi' } });

    // Not a backend of the Service, nor counted by the disruption budget or the NetworkPolicy.
    const labels = pod['metadata'].labels as Record<string, string>;
    expect(labels).to.include({ 'app.kubernetes.io/instance': 'shop', 'app.kubernetes.io/component': 'test' });
    expect(selects(only(manifests, 'Service')['spec'].selector, labels)).to.equal(false);
    const policy = only(manifests, 'NetworkPolicy');
    expect(selects(policy['spec'].podSelector.matchLabels, labels)).to.equal(false);
    // But the NetworkPolicy lets it reach the API, from the release's namespace.
    expect(policy['spec'].ingress).to.deep.include({
      ports: [{ port: 'http', protocol: 'TCP' }],
      from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'kvcrud-test', 'app.kubernetes.io/instance': 'shop' } } }],
    });
  });

  it('is named in the install notes, with the command that runs it', async () => {
    expect(await notes(helm, { valuesFiles: [MONITORING_VALUES], release: 'shop', namespace: 'apps' })).to.contain('  helm test shop --namespace apps --logs');
    expect(await notes(helm, { valuesFiles: ['ci/default-values.yaml'] })).to.not.contain('helm test');
  });

  it("calls the release's Service about its default store, with the key from tests.apiKey", async () => {
    const env = (manifests: Manifest[]) => (testPod(manifests)['spec'].containers[0].env as Manifest[]).filter((entry) => entry['name'] !== 'KVCRUD_READY_WITHIN_SECONDS');
    expect(env(await render(helm, { valuesFiles: [MONITORING_VALUES], release: 'shop', set: { 'service.port': 80 } }))).to.deep.equal([
      { name: 'KVCRUD_URL', value: 'http://shop-kvcrud:80' },
      { name: 'KVCRUD_STORE', value: 'main' },
      { name: 'KVCRUD_API_KEY', valueFrom: { secretKeyRef: { name: 'kvcrud-test-key', key: 'api-key' } } },
    ]);
    const single = { 'auth.mode': 'none', 'tests.enabled': true };
    for (const [set, store] of [
      [single, 'bigtable'],
      [{ ...single, dataStore: 'embedded', gcp: { projectId: '' }, bigtable: { instanceIds: [] } }, 'embedded'],
      [{ ...single, gcp: { projectId: '' }, bigtable: { instanceIds: [] }, stores: { ledger: { driver: 'spanner', projectId: 'my-project', instance: 'my-instance', instances: ['ledger'] } } }, 'ledger'],
    ] as const) {
      const rendered = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set });
      expect(env(rendered), store).to.deep.equal([
        { name: 'KVCRUD_URL', value: 'http://kvcrud:8080' },
        { name: 'KVCRUD_STORE', value: store },
      ]);
    }
  });

  it('refuses a credential it cannot send, and a missing one', async () => {
    const problems = async (set: Record<string, unknown>) => (await template(helm, { valuesFiles: ['ci/default-values.yaml'], set })).stderr;
    expect(await problems({ 'tests.enabled': true })).to.contain(
      '- tests.apiKey.existingSecret is required with tests.enabled and auth.mode apikey: a Secret holding a key with a role on the default store (bigtable)',
    );
    expect(await problems({ 'tests.enabled': true, 'auth.mode': 'oidc', 'auth.oidc.issuer': 'https://issuer.example.com', 'tests.apiKey.existingSecret': 'k' })).to.contain(
      '- tests.enabled needs auth.mode none or one with apikey (not oidc): the test pod sends an API key (tests.apiKey)',
    );
    expect(await problems({ 'tests.enabled': true, 'auth.mode': 'none', 'tests.apiKey.existingSecret': 'k' })).to.contain('- tests.apiKey.existingSecret is never sent with auth.mode none');
    expect(await problems({ 'tests.apiKey.existingSecret': 'k' })).to.contain('- tests.apiKey.existingSecret is set but tests.enabled is false');
    const schema = await problems({ 'tests.enabled': 'yes', 'tests.readyWithinSeconds': -1, 'tests.apiKey.existingSecret': 'Test_Key' });
    for (const path of ['/tests/enabled', '/tests/readyWithinSeconds', '/tests/apiKey/existingSecret']) expect(schema, path).to.contain(`at '${path}'`);
  });

  describe('run against a service', () => {
    const directory = mkdtempSync(join(tmpdir(), 'kvcrud-helm-test-'));
    const key = newApiKey();
    const secrets = { 'kvcrud-test-key/api-key': key };
    let pod: Manifest;
    let ready: ServiceProcess | undefined;
    let degraded: ServiceProcess | undefined;

    before(async () => {
      // The release the pod is rendered for: the default store main, keys, the test's key a reader.
      pod = testPod(
        await render(helm, {
          valuesFiles: ['ci/default-values.yaml'],
          set: { gcp: { projectId: '' }, bigtable: { instanceIds: [] }, stores: { main: { driver: 'embedded', instances: ['local'] } }, tests: { enabled: true, readyWithinSeconds: 0, apiKey: { existingSecret: 'kvcrud-test-key' } } },
        }),
      );
      writeFileSync(join(directory, 'keys.json'), keysFile([{ name: 'helm-test', key, role: 'reader', instances: ['main/*'] }]));
      const stores = (extra: string) => {
        const file = join(directory, `stores-${extra === '' ? 'one' : 'two'}.yaml`);
        writeFileSync(file, ['default: main', 'stores:', `  main: { driver: embedded, dataDir: ${join(directory, extra === '' ? 'one' : 'two')}, instances: [local] }`, extra].join('\n'));
        return cleanEnv({ PORT: '0', STORES_FILE: file, AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: join(directory, 'keys.json'), STORE_TIMEOUT_MS: '500' });
      };
      // A second store whose backend is never there (nothing listens at its address): /readyz is degraded.
      const nowhere = await closedPort();
      [ready, degraded] = await Promise.all([runService(stores('')), runService(stores(`  cache: { driver: redis, url: "redis://127.0.0.1:${nowhere}", instances: [sessions] }`))]);
    });

    after(async () => {
      await Promise.all([ready?.stop(), degraded?.stop()]);
      rmSync(directory, { recursive: true, force: true });
    });

    it('passes when every store answers and the key may use the default store', async () => {
      const run = await runTestPod(pod, ready?.baseUrl ?? '', secrets);
      expect(run.code, run.stderr).to.equal(0);
      expect(run.stdout).to.contain('ok   GET /readyz: {"status":"ready"}').and.contain('ok   GET /v2/stores/main: driver embedded, instances local');
    });

    it('fails, saying why, with a key the service does not know', async () => {
      const run = await runTestPod(pod, ready?.baseUrl ?? '', { 'kvcrud-test-key/api-key': newApiKey() });
      expect(run.code).to.equal(1);
      expect(run.stderr).to.contain('FAIL GET /v2/stores/main answered 401 (tests.apiKey: a key with a role on the default store)').and.contain('"code":"UNAUTHENTICATED"');
    });

    it('fails, saying why, when a store does not answer', async () => {
      const run = await runTestPod(pod, degraded?.baseUrl ?? '', secrets);
      expect(run.code).to.equal(1);
      expect(run.stderr).to.contain('FAIL GET /readyz answered 200 {"status":"degraded"} (degraded: a store does not answer');
    });

    it('fails, saying why, when nothing answers at the address', async () => {
      const port = await closedPort();
      const run = await runTestPod(pod, `http://127.0.0.1:${port}`, secrets);
      expect(run.code).to.equal(1);
      expect(run.stderr).to.contain(`FAIL GET http://127.0.0.1:${port}/readyz: connect ECONNREFUSED 127.0.0.1:${port}`);
    });
  });
});
