import { readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { expect } from 'chai';
import { parse } from 'yaml';
import { parseApiKeysFile, parseGrantsFile } from '../../src/auth/access-files.ts';
import { loadConfig } from '../../src/config.ts';
import { newApiKey, sha256Hex, tempDirectory } from '../support/access-files.ts';
import { CHART_DIR, ciValuesFiles, container, environment, helmBinary, type Manifest, notes, only, render, serviceConfigMap } from '../support/helm.ts';
import { type ServiceProcess, cleanEnv, runService } from '../support/service-process.ts';

const API_KEYS_FILE = '/etc/kvcrud/api-keys/keys.json';
const GRANTS_FILE = '/etc/kvcrud/oidc-grants/grants.json';
const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const SECURITY_DOC = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');

function podSpec(manifests: readonly Manifest[]): Manifest {
  return only(manifests, 'Deployment')['spec'].template.spec as Manifest;
}

function valuesOf(valuesFile: string): Manifest {
  return parse(readFileSync(`${CHART_DIR}${valuesFile}`, 'utf8')) as Manifest;
}

/**
 * The content the pod would see at `path`: the volume mounted at its directory, and in it the
 * item projected to its name, from the Secret or ConfigMap the chart renders. Undefined when that
 * object is the user's own (existingSecret, existingConfigMap). Fails on a subPath mount.
 */
function projectedFile(manifests: readonly Manifest[], path: string): string | undefined {
  const mounts = container(manifests)['volumeMounts'] as Manifest[];
  const mount = mounts.find((candidate) => candidate['mountPath'] === dirname(path));
  expect(mount, `a volume mounted at ${dirname(path)}`).to.not.equal(undefined);
  expect(mount).to.not.have.property('subPath');
  expect(mount?.['readOnly']).to.equal(true);
  const volume = (podSpec(manifests)['volumes'] as Manifest[]).find((candidate) => candidate['name'] === mount?.['name']) ?? {};
  const source = (volume['secret'] ?? volume['configMap']) as Manifest;
  const item = (source['items'] as Manifest[]).find((candidate) => candidate['path'] === basename(path));
  expect(item, `an item projected to ${basename(path)}`).to.not.equal(undefined);
  const [kind, name] = volume['secret'] ? ['Secret', source['secretName']] : ['ConfigMap', source['name']];
  const object = manifests.find((manifest) => manifest['kind'] === kind && manifest['metadata'].name === name);
  return object?.[kind === 'Secret' ? 'stringData' : 'data'][item?.['key']] as string | undefined;
}

/** Runs the real service with the environment and access files the chart renders (the store: embedded, in a temporary directory). */
async function serveAsRendered(manifests: readonly Manifest[], dir: string): Promise<ServiceProcess> {
  const env = environment(manifests);
  for (const variable of ['AUTH_API_KEYS_FILE', 'AUTH_OIDC_GRANTS_FILE']) {
    const path = env[variable];
    if (path === undefined) continue;
    const local = join(dir, basename(path));
    writeFileSync(local, projectedFile(manifests, path) ?? '');
    env[variable] = local;
  }
  return runService(cleanEnv({ ...env, PORT: '0', DATA_DIR: join(dir, 'data') }));
}

function createTable(baseUrl: string, instance: string, key?: string): Promise<Response> {
  return fetch(`${baseUrl}/v1/${instance}/createTable`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'x-api-key': key }) },
    body: JSON.stringify({ tableName: 'orders', columnFamily: 'cf' }),
  });
}

async function codeOf(response: Response): Promise<[number, unknown]> {
  return [response.status, ((await response.json()) as { code?: unknown }).code];
}

describe('the Helm chart authentication values', function () {
  this.timeout(60_000);
  let helm: string;

  before(async function () {
    helm = await helmBinary(this);
  });

  describe('API keys', () => {
    it('are the default, with an empty keys file in a Secret: every v1 call is refused', async () => {
      const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'] });
      const env = environment(manifests);
      expect(env).to.include({ AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: API_KEYS_FILE, AUTH_PROTECT_DOCS: 'false' });
      const file = projectedFile(manifests, API_KEYS_FILE) ?? '';
      expect(JSON.parse(file)).to.deep.equal({ keys: [] });
      expect(parseApiKeysFile(file)).to.deep.equal([]);
      expect(loadConfig(env).auth).to.deep.equal({ modes: ['apikey'], apiKeysFile: API_KEYS_FILE, protectDocs: false });
      expect(only(manifests, 'Secret', 'kvcrud-api-keys')['type']).to.equal('Opaque');
    });

    it('are refused, every one, by the service run as the default install renders it', async () => {
      const dir = tempDirectory();
      const service = await serveAsRendered(await render(helm, { set: { dataStore: 'embedded' } }), dir.path);
      try {
        expect(await codeOf(await createTable(service.baseUrl, 'local'))).to.deep.equal([401, 'UNAUTHENTICATED']);
        expect(await codeOf(await createTable(service.baseUrl, 'local', newApiKey()))).to.deep.equal([401, 'UNAUTHENTICATED']);
        expect((await fetch(`${service.baseUrl}/readyz`)).status).to.equal(200);
      } finally {
        await service.stop();
        dir.remove();
      }
    });

    it('from auth.apiKeys.keys go into the Secret as the keys file the service parses, digests only', async () => {
      const manifests = await render(helm, { valuesFiles: ['ci/auth-api-keys-values.yaml'] });
      const file = projectedFile(manifests, API_KEYS_FILE) ?? '';
      expect(JSON.parse(file)).to.deep.equal({ keys: valuesOf('ci/auth-api-keys-values.yaml')['auth'].apiKeys.keys });
      expect(parseApiKeysFile(file).map((key) => [key.name, key.grant.role])).to.deep.equal([
        ['orders-svc', 'writer'],
        ['ops', 'admin'],
        ['reports', 'reader'],
      ]);
      const env = environment(manifests);
      expect(env).to.include({ AUTH_MODE: 'apikey', AUTH_PROTECT_DOCS: 'true', MAX_INFLIGHT: '128', RATE_LIMIT_PER_SECOND: '50' });
      expect(loadConfig(env)).to.deep.include({ maxInflight: 128, rateLimitPerSecond: 50 });
      expect(loadConfig(env).auth).to.deep.equal({ modes: ['apikey'], apiKeysFile: API_KEYS_FILE, protectDocs: true });
    });

    it('from auth.apiKeys.keys let the service grant each key its role, and guard the docs', async () => {
      // The keys of ci/auth-api-keys-values.yaml are the SHA-256 of these (reports' in capitals).
      const keys = { orders: 'orders-key', ops: 'ops-key', reports: 'reports-key' };
      const dir = tempDirectory();
      const manifests = await render(helm, {
        valuesFiles: ['ci/auth-api-keys-values.yaml'],
        set: { dataStore: 'embedded', 'embedded.instanceIds': ['orders-prod', 'users-prod'] },
      });
      const service = await serveAsRendered(manifests, dir.path);
      try {
        expect(await codeOf(await createTable(service.baseUrl, 'users-prod', keys.ops))).to.deep.equal([201, undefined]);
        expect(await codeOf(await createTable(service.baseUrl, 'orders-prod', keys.reports))).to.deep.equal([403, 'PERMISSION_DENIED']);
        expect(await codeOf(await createTable(service.baseUrl, 'users-prod', keys.orders))).to.deep.equal([403, 'PERMISSION_DENIED']);
        expect(await codeOf(await createTable(service.baseUrl, 'users-prod'))).to.deep.equal([401, 'UNAUTHENTICATED']);
        expect((await fetch(`${service.baseUrl}/openapi.json`)).status).to.equal(401);
        expect((await fetch(`${service.baseUrl}/openapi.json`, { headers: { 'x-api-key': keys.reports } })).status).to.equal(200);
      } finally {
        await service.stop();
        dir.remove();
      }
    });

    it('from auth.apiKeys.existingSecret are mounted from that Secret, under its secretKey, and the chart makes none', async () => {
      const manifests = await render(helm, { valuesFiles: ['ci/auth-oidc-gke-values.yaml'], set: { 'auth.apiKeys.secretKey': 'api-keys.json' } });
      expect(environment(manifests)['AUTH_API_KEYS_FILE']).to.equal('/etc/kvcrud/api-keys/api-keys.json');
      expect(podSpec(manifests)['volumes']).to.deep.include({
        name: 'api-keys',
        secret: { secretName: 'kvcrud-api-keys', defaultMode: 0o440, items: [{ key: 'api-keys.json', path: 'api-keys.json' }] },
      });
      expect(projectedFile(manifests, '/etc/kvcrud/api-keys/api-keys.json')).to.equal(undefined);
      expect(manifests.map((manifest) => manifest['kind'])).to.not.include('Secret');
    });
  });

  describe('OIDC', () => {
    it('with inCluster fetches the API server keys with the pod token, trusting the cluster CA', async () => {
      const manifests = await render(helm, { valuesFiles: ['ci/auth-oidc-in-cluster-values.yaml'] });
      const env = environment(manifests);
      expect(env).to.include({
        AUTH_MODE: 'oidc',
        AUTH_OIDC_ISSUER: 'https://kubernetes.default.svc.cluster.local',
        AUTH_OIDC_AUDIENCE: 'kvcrud',
        AUTH_OIDC_GRANTS_FILE: GRANTS_FILE,
        AUTH_OIDC_JWKS_URI: 'https://kubernetes.default.svc/openid/v1/jwks',
        AUTH_OIDC_JWKS_TOKEN_FILE: `${SERVICE_ACCOUNT_DIR}/token`,
      });
      expect(env).to.not.have.property('AUTH_API_KEYS_FILE');
      // Node's own variable, beside the service's configuration rather than in it.
      expect(container(manifests)['env']).to.deep.include({ name: 'NODE_EXTRA_CA_CERTS', value: `${SERVICE_ACCOUNT_DIR}/ca.crt` });
      expect(serviceConfigMap(manifests)['data']).to.not.have.property('NODE_EXTRA_CA_CERTS');
      // The token and ca.crt are what Kubernetes mounts with automountServiceAccountToken.
      expect(podSpec(manifests)['automountServiceAccountToken']).to.equal(true);
      expect(loadConfig(env).auth).to.deep.equal({
        modes: ['oidc'],
        protectDocs: false,
        oidc: {
          issuer: 'https://kubernetes.default.svc.cluster.local',
          audiences: ['kvcrud'],
          grantsFile: GRANTS_FILE,
          jwksUri: 'https://kubernetes.default.svc/openid/v1/jwks',
          jwksTokenFile: `${SERVICE_ACCOUNT_DIR}/token`,
        },
      });
      const grants = projectedFile(manifests, GRANTS_FILE) ?? '';
      expect(JSON.parse(grants)).to.deep.equal({ grants: valuesOf('ci/auth-oidc-in-cluster-values.yaml')['auth'].oidc.grants });
      expect(parseGrantsFile(grants).map((grant) => ('subject' in grant ? grant.subject : grant.email))).to.deep.equal([
        'system:serviceaccount:shop:orders',
        'system:serviceaccount:reports:nightly',
      ]);
      const explicit = environment(await render(helm, { valuesFiles: ['ci/auth-oidc-in-cluster-values.yaml'], set: { 'auth.oidc.jwksUri': 'https://10.0.0.1/openid/v1/jwks' } }));
      expect(explicit).to.include({ AUTH_OIDC_JWKS_URI: 'https://10.0.0.1/openid/v1/jwks', AUTH_OIDC_JWKS_TOKEN_FILE: `${SERVICE_ACCOUNT_DIR}/token` });
    });

    it('on GKE fetches the keys by discovery, with no token and no CA of the pod', async () => {
      const manifests = await render(helm, { valuesFiles: ['ci/auth-oidc-gke-values.yaml'] });
      const env = environment(manifests);
      expect(env).to.include({ AUTH_MODE: 'apikey,oidc', AUTH_API_KEYS_FILE: API_KEYS_FILE, AUTH_OIDC_GRANTS_FILE: GRANTS_FILE });
      for (const variable of ['AUTH_OIDC_JWKS_URI', 'AUTH_OIDC_JWKS_TOKEN_FILE', 'NODE_EXTRA_CA_CERTS']) expect(env).to.not.have.property(variable);
      expect(podSpec(manifests)['automountServiceAccountToken']).to.equal(false);
      const config = loadConfig(env);
      expect(config.auth.modes).to.deep.equal(['apikey', 'oidc']);
      expect(config.auth.oidc?.issuer).to.equal('https://container.googleapis.com/v1/projects/my-project/locations/europe-west1/clusters/prod');
    });

    it('with auth.oidc.existingConfigMap mounts that ConfigMap and makes no grants of its own', async () => {
      const manifests = await render(helm, { valuesFiles: ['ci/auth-oidc-google-values.yaml'] });
      expect(podSpec(manifests)['volumes']).to.deep.include({ name: 'oidc-grants', configMap: { name: 'kvcrud-grants', items: [{ key: 'grants.json', path: 'grants.json' }] } });
      expect(projectedFile(manifests, GRANTS_FILE)).to.equal(undefined);
      expect(manifests.filter((manifest) => manifest['kind'] === 'ConfigMap').map((configMap) => configMap['metadata'].name)).to.deep.equal(['kvcrud']);
      const oidc = loadConfig(environment(manifests)).auth.oidc;
      expect(oidc).to.deep.include({ audiences: ['https://kvcrud.example.com', 'kvcrud'], jwksUri: 'https://www.googleapis.com/oauth2/v3/certs' });
      expect(oidc).to.not.have.property('jwksTokenFile');
    });

    it('opens egress on TCP 443 for the issuer when the NetworkPolicy restricts egress', async () => {
      const inCluster = only(await render(helm, { valuesFiles: ['ci/auth-oidc-in-cluster-values.yaml'] }), 'NetworkPolicy');
      expect(inCluster['spec'].egress).to.have.length(2);
      expect(inCluster['spec'].egress.at(-1)).to.deep.equal({ ports: [{ port: 443, protocol: 'TCP' }] });
      // Egress left open: nothing to add.
      const open = only(await render(helm, { valuesFiles: ['ci/auth-oidc-in-cluster-values.yaml'], set: { 'networkPolicy.egress': [] } }), 'NetworkPolicy');
      expect(open['spec']).to.not.have.property('egress');
      // API keys only: no issuer to reach.
      const egress = [{ ports: [{ port: 53, protocol: 'UDP' }] }];
      const apiKeys = only(await render(helm, { valuesFiles: ['ci/auth-api-keys-values.yaml'], set: { networkPolicy: { enabled: true, egress } } }), 'NetworkPolicy');
      expect(apiKeys['spec'].egress).to.deep.equal(egress);
    });
  });

  it('with auth.mode none mounts no access file and makes none', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'auth.mode': 'none' } });
    const env = environment(manifests);
    expect(env).to.include({ AUTH_MODE: 'none', AUTH_PROTECT_DOCS: 'false' });
    expect(Object.keys(env).filter((name) => name.startsWith('AUTH_')).sort()).to.deep.equal(['AUTH_MODE', 'AUTH_PROTECT_DOCS']);
    expect(loadConfig(env).auth).to.deep.equal({ modes: [], protectDocs: false });
    expect(manifests.map((manifest) => manifest['kind']).sort()).to.deep.equal(['ConfigMap', 'Deployment', 'Service', 'ServiceAccount']);
    expect((container(manifests)['volumeMounts'] as Manifest[]).map((mount) => mount['name'])).to.deep.equal(['tmp']);
  });

  it('gives every variant access files the service accepts, mounted as directories, never with subPath', async () => {
    for (const valuesFile of ciValuesFiles()) {
      const manifests = await render(helm, { valuesFiles: [valuesFile] });
      for (const mount of container(manifests)['volumeMounts'] as Manifest[]) expect(mount, valuesFile).to.not.have.property('subPath');
      const env = environment(manifests);
      const keys = env['AUTH_API_KEYS_FILE'] === undefined ? undefined : projectedFile(manifests, env['AUTH_API_KEYS_FILE']);
      if (keys !== undefined) expect(() => parseApiKeysFile(keys), valuesFile).to.not.throw();
      const grants = env['AUTH_OIDC_GRANTS_FILE'] === undefined ? undefined : projectedFile(manifests, env['AUTH_OIDC_GRANTS_FILE']);
      if (grants !== undefined) expect(() => parseGrantsFile(grants), valuesFile).to.not.throw();
    }
  });

  it('leaves the keys and grants out of checksum/config, so edits apply without rolling the pods', async () => {
    const rendered = async (valuesFile: string, set: Record<string, unknown> = {}) => {
      const manifests = await render(helm, { valuesFiles: [valuesFile], set });
      const env = environment(manifests);
      return {
        checksum: only(manifests, 'Deployment')['spec'].template.metadata.annotations['checksum/config'] as string,
        keys: env['AUTH_API_KEYS_FILE'] === undefined ? undefined : projectedFile(manifests, env['AUTH_API_KEYS_FILE']),
        grants: env['AUTH_OIDC_GRANTS_FILE'] === undefined ? undefined : projectedFile(manifests, env['AUTH_OIDC_GRANTS_FILE']),
      };
    };
    const keysBefore = await rendered('ci/auth-api-keys-values.yaml');
    const newKey = [{ name: 'new', sha256: sha256Hex(newApiKey()), role: 'reader', instances: ['*'] }];
    const keysAfter = await rendered('ci/auth-api-keys-values.yaml', { 'auth.apiKeys.keys': newKey });
    expect(keysAfter.keys).to.not.equal(keysBefore.keys);
    expect(keysAfter.checksum).to.equal(keysBefore.checksum);

    const grantsBefore = await rendered('ci/auth-oidc-in-cluster-values.yaml');
    const grantsAfter = await rendered('ci/auth-oidc-in-cluster-values.yaml', { 'auth.oidc.grants': [{ email: 'a@example.com', role: 'admin', instances: ['*'] }] });
    expect(grantsAfter.grants).to.not.equal(grantsBefore.grants);
    expect(grantsAfter.checksum).to.equal(grantsBefore.checksum);

    // What the service reads only at start-up does roll them.
    expect((await rendered('ci/auth-api-keys-values.yaml', { 'auth.protectDocs': false })).checksum).to.not.equal(keysBefore.checksum);
    expect((await rendered('ci/auth-oidc-in-cluster-values.yaml', { 'auth.oidc.issuer': 'https://issuer.example.com' })).checksum).to.not.equal(grantsBefore.checksum);
  });

  describe('in docs/security.md', () => {
    // Each ```yaml block of docs/security.md that sets chart values (auth:), placeholders filled in.
    const blocks = [...SECURITY_DOC.matchAll(/```yaml\n([\s\S]*?)```/g)]
      .map(([, block = '']) => block.replaceAll(/"<hex SHA-256 of [^"]*>"/g, `"${sha256Hex('a key')}"`))
      .filter((block) => /^auth:$/m.test(block));

    it('shows chart values', () => {
      expect(blocks).to.have.length.of.at.least(4);
    });

    it('shows values the chart renders into a configuration the service accepts', async () => {
      const dir = tempDirectory();
      try {
        for (const [index, block] of blocks.entries()) {
          const file = join(dir.path, `readme-${index}.yaml`);
          writeFileSync(file, block);
          const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml', file] });
          const env = environment(manifests);
          expect(() => loadConfig(env), block).to.not.throw();
          for (const variable of ['AUTH_API_KEYS_FILE', 'AUTH_OIDC_GRANTS_FILE']) {
            const content = env[variable] === undefined ? undefined : projectedFile(manifests, env[variable]);
            if (content !== undefined) expect(() => (variable === 'AUTH_API_KEYS_FILE' ? parseApiKeysFile : parseGrantsFile)(content), block).to.not.throw();
          }
        }
      } finally {
        dir.remove();
      }
    });

    it('says truly which variables auth.oidc.inCluster sets', async () => {
      const block = blocks.find((candidate) => candidate.includes('inCluster: true')) ?? '';
      // "which sets `A=x`, `B=y` and `C=z`", in the paragraph right after the block.
      const sentence = /```yaml\n[^`]*inCluster: true[^`]*```\n\nwhich sets ([\s\S]*?)\n\n/.exec(SECURITY_DOC)?.[1] ?? '';
      const stated = Object.fromEntries([...sentence.matchAll(/`([A-Z_]+)=([^`]+)`/g)].map(([, name = '', value = '']) => [name, value]));
      expect(Object.keys(stated)).to.have.members(['AUTH_OIDC_JWKS_URI', 'AUTH_OIDC_JWKS_TOKEN_FILE', 'NODE_EXTRA_CA_CERTS']);
      const dir = tempDirectory();
      try {
        writeFileSync(join(dir.path, 'values.yaml'), block);
        expect(environment(await render(helm, { valuesFiles: ['ci/default-values.yaml', join(dir.path, 'values.yaml')] }))).to.include(stated);
      } finally {
        dir.remove();
      }
    });
  });

  describe('NOTES.txt', () => {
    it('warns that API keys without a key refuse every call, with the key recipe of docs/security.md', async () => {
      const text = await notes(helm, { valuesFiles: ['ci/default-values.yaml'] });
      expect(text).to.contain('WARNING: auth.apiKeys.keys is empty: every v1 call is refused (401) until you add a key.');
      const recipe = /Make a key and its digest:\n\n```sh\n([\s\S]*?)```/.exec(SECURITY_DOC)?.[1] ?? '';
      expect(recipe).to.contain('openssl rand');
      for (const line of recipe.trim().split('\n')) expect(text).to.contain(`  ${line}\n`);
      expect(text).to.contain("helm upgrade kvcrud charts/kvcrud --namespace apps --reuse-values \\\n    --set-json 'auth.apiKeys.keys=[");
    });

    it('counts the keys and grants, and warns of none', async () => {
      const apiKeys = await notes(helm, { valuesFiles: ['ci/auth-api-keys-values.yaml'] });
      expect(apiKeys).to.contain('keys file from the Secret kvcrud-api-keys (3 keys).').and.not.contain('WARNING');
      const gke = await notes(helm, { valuesFiles: ['ci/auth-oidc-gke-values.yaml'] });
      expect(gke).to.contain('keys file from the Secret kvcrud-api-keys (key keys.json).');
      expect(gke).to.contain('grants from the ConfigMap kvcrud-oidc-grants (1 grant).').and.not.contain('WARNING');
      const noGrants = await notes(helm, { valuesFiles: ['ci/auth-oidc-in-cluster-values.yaml'], set: { 'auth.oidc.grants': [] } });
      expect(noGrants).to.contain('WARNING: auth.oidc.grants is empty: every token is refused (403)');
      expect(noGrants).to.contain('The ServiceAccount apps/kvcrud needs the ClusterRole system:service-account-issuer-discovery');
    });

    it('warns that auth.mode none makes every caller admin', async () => {
      const text = await notes(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'auth.mode': 'none' } });
      expect(text).to.contain('WARNING: auth.mode is none: anyone who can reach the Service is admin on every instance');
      expect(text).to.not.contain('Authentication:');
    });
  });
});
