import { expect } from 'chai';
import { helmBinary, notes, template } from '../support/helm.ts';

/** The problems validateValues listed, one per "- " line after its header. */
function problemsIn(stderr: string): string[] {
  const listed = stderr.split('kvcrud: invalid values:\n')[1] ?? '';
  return listed
    .split('\n')
    .filter((line) => line.startsWith('- '))
    .map((line) => line.slice(2));
}

const WORKLOAD_IDENTITY = { 'serviceAccount.annotations': { 'iam.gke.io/gcp-service-account': 'kvcrud@my-project.iam.gserviceaccount.com' } };

describe('the Helm chart refuses invalid values', function () {
  this.timeout(60_000);
  let helm: string;

  before(async function () {
    helm = await helmBinary(this);
  });

  const cases: Array<{ name: string; valuesFiles?: string[]; set: Record<string, unknown>; problems: RegExp[] }> = [
    {
      name: 'a key file and Workload Identity at once',
      valuesFiles: ['ci/existing-secret-values.yaml'],
      set: WORKLOAD_IDENTITY,
      problems: [/^credentials\.existingSecret and Workload Identity \(serviceAccount\.annotations iam\.gke\.io\/gcp-service-account\) are both set: choose one$/],
    },
    {
      name: 'a key file with the emulator',
      valuesFiles: ['ci/existing-secret-values.yaml'],
      set: { 'bigtable.emulatorHost': 'emulator:8086' },
      problems: [/^credentials\.existingSecret is never read with bigtable\.emulatorHost set/],
    },
    {
      name: 'more than one pod of the embedded store',
      valuesFiles: ['ci/embedded-values.yaml'],
      set: { replicaCount: 3 },
      problems: [/^replicaCount is 3, but the embedded store runs in exactly one pod: set replicaCount=1$/],
    },
    {
      name: 'autoscaling the embedded store',
      valuesFiles: ['ci/embedded-values.yaml'],
      set: { 'autoscaling.enabled': true },
      problems: [/^autoscaling\.enabled cannot be used with dataStore=embedded/],
    },
    {
      name: 'a disruption budget that would never let the embedded pod be evicted',
      valuesFiles: ['ci/embedded-values.yaml'],
      set: { podDisruptionBudget: { enabled: true, minAvailable: 1, maxUnavailable: '' } },
      problems: [/^podDisruptionBudget\.minAvailable would block every eviction of the embedded store's single pod: use maxUnavailable$/],
    },
    {
      name: 'scrapers of the http port when /metrics there needs a credential',
      valuesFiles: ['ci/default-values.yaml'],
      set: { 'metrics.port': null, 'serviceMonitor.enabled': true },
      problems: [/^serviceMonitor and podMonitoring need metrics\.port when auth\.mode is not none: on the http port \/metrics needs a credential, which the scrapers do not send$/],
    },
    {
      name: 'a share per caller above what the pod takes',
      valuesFiles: ['ci/default-values.yaml'],
      set: { 'config.maxInflight': 8, 'config.maxInflightPerCaller': 9 },
      problems: [/^config\.maxInflightPerCaller \(9\) is above config\.maxInflight \(8\): one caller cannot have more requests in flight than the pod takes$/],
    },
    {
      name: 'persistence without the embedded store',
      valuesFiles: ['ci/default-values.yaml'],
      set: { 'embedded.persistence.enabled': true },
      problems: [/^embedded\.persistence\.enabled only applies to dataStore=embedded$/],
    },
    {
      name: 'annotations for a ServiceAccount the chart does not create',
      valuesFiles: ['ci/default-values.yaml'],
      set: { 'serviceAccount.create': false, ...WORKLOAD_IDENTITY },
      problems: [/^serviceAccount\.annotations only apply when serviceAccount\.create is true/],
    },
    {
      name: 'an autoscaler whose minimum is above its maximum',
      valuesFiles: ['ci/default-values.yaml'],
      set: { autoscaling: { enabled: true, minReplicas: 5, maxReplicas: 2 } },
      problems: [/^autoscaling\.minReplicas \(5\) is above autoscaling\.maxReplicas \(2\)$/],
    },
    {
      name: 'a disruption budget with both bounds',
      valuesFiles: ['ci/default-values.yaml'],
      set: { podDisruptionBudget: { enabled: true, minAvailable: 1, maxUnavailable: 1 } },
      problems: [/^podDisruptionBudget needs exactly one of minAvailable and maxUnavailable/],
    },
    {
      name: 'an unknown authentication mode, a repeated one, and none with another',
      valuesFiles: ['ci/default-values.yaml'],
      set: { 'auth.mode': 'none, apikey,apikey,ldap' },
      problems: [/^auth\.mode entry "ldap" is not one of none, apikey, oidc$/, /^auth\.mode lists a mode more than once$/, /^auth\.mode cannot combine none with other modes$/],
    },
    {
      name: 'oidc without an issuer or an audience',
      valuesFiles: ['ci/default-values.yaml'],
      set: { 'auth.mode': 'oidc', 'auth.oidc.audience': '' },
      problems: [/^auth\.oidc\.issuer is required with auth\.mode oidc/, /^auth\.oidc\.audience is required with auth\.mode oidc/],
    },
    {
      name: 'protected docs with no authentication',
      valuesFiles: ['ci/default-values.yaml'],
      set: { auth: { mode: 'none', protectDocs: true } },
      problems: [/^auth\.protectDocs needs auth\.mode apikey or oidc/],
    },
    {
      name: 'API keys and OIDC settings of modes that are off, since they would protect nothing',
      valuesFiles: ['ci/auth-oidc-gke-values.yaml'],
      set: { 'auth.mode': 'none' },
      problems: [/^auth\.apiKeys is set but auth\.mode does not include apikey$/, /^auth\.oidc is set but auth\.mode does not include oidc$/],
    },
    {
      name: 'keys in the values and a Secret of keys at once',
      valuesFiles: ['ci/auth-api-keys-values.yaml'],
      set: { 'auth.apiKeys.existingSecret': 'my-keys' },
      problems: [/^auth\.apiKeys\.keys is never used with auth\.apiKeys\.existingSecret set/],
    },
    {
      name: 'grants in the values and a ConfigMap of grants at once',
      valuesFiles: ['ci/auth-oidc-in-cluster-values.yaml'],
      set: { 'auth.oidc.existingConfigMap': 'my-grants' },
      problems: [/^auth\.oidc\.grants is never used with auth\.oidc\.existingConfigMap set/],
    },
    {
      name: 'two keys with one name, and two with one digest in other cases, which the service would refuse at start',
      valuesFiles: ['ci/default-values.yaml'],
      set: {
        'auth.apiKeys.keys': [
          { name: 'a', sha256: 'ab'.repeat(32), role: 'reader', instances: ['*'] },
          { name: 'a', sha256: 'cd'.repeat(32), role: 'reader', instances: ['*'] },
          { name: 'b', sha256: 'AB'.repeat(32), role: 'reader', instances: ['*'] },
        ],
      },
      problems: [/^auth\.apiKeys\.keys repeats a name/, /^auth\.apiKeys\.keys repeats a sha256/],
    },
    {
      name: 'a metrics port that is the container port and the Service port',
      valuesFiles: ['ci/default-values.yaml'],
      set: { 'metrics.port': 8080 },
      problems: [/^metrics\.port \(8080\) must differ from containerPort \(8080\): the service serves \/metrics on a listener of its own/, /^metrics\.port \(8080\) must differ from service\.port \(8080\): the Service exposes both$/],
    },
    {
      name: 'scraper peers for a metrics port that is not there',
      valuesFiles: ['ci/default-values.yaml'],
      set: { 'metrics.port': null, networkPolicy: { enabled: true, metricsFrom: [{ namespaceSelector: {} }] } },
      problems: [/^networkPolicy\.metricsFrom needs metrics\.port: with \/metrics on the http port, the scraper must be in networkPolicy\.ingressFrom$/],
    },
    {
      name: 'tracing values without an endpoint, since tracing would never start',
      valuesFiles: ['ci/observability-values.yaml'],
      set: { 'tracing.otlpEndpoint': '' },
      problems: [/^tracing\.protocol, tracing\.sampler, tracing\.serviceName, tracing\.resourceAttributes, tracing\.samplerArg, tracing\.headersSecret\.existingSecret, networkPolicy\.tracingTo are set but tracing\.otlpEndpoint is empty: tracing starts only with an endpoint$/],
    },
    {
      name: 'a sampler argument the sampler does not read',
      valuesFiles: ['ci/default-values.yaml'],
      set: { tracing: { otlpEndpoint: 'http://collector:4318', sampler: 'always_on', samplerArg: 0.5 } },
      problems: [/^tracing\.samplerArg is only read by tracing\.sampler traceidratio or parentbased_traceidratio, not "always_on"$/],
    },
    {
      name: 'scrape timeouts longer than their intervals',
      valuesFiles: ['ci/default-values.yaml'],
      set: { serviceMonitor: { enabled: true, interval: '30s', scrapeTimeout: '1m' }, podMonitoring: { enabled: true, interval: '500ms', timeout: '1s' } },
      problems: [/^podMonitoring\.timeout \(1s\) is longer than podMonitoring\.interval \(500ms\)$/, /^serviceMonitor\.scrapeTimeout \(1m\) is longer than serviceMonitor\.interval \(30s\)$/],
    },
    {
      name: 'stores entries without what their driver needs, naming each entry',
      set: {
        stores: {
          main: { driver: 'bigtable', instances: ['orders-prod'], emulatorHost: 'emulator:8086', credentials: { existingSecret: 'main-key' } },
          local: { driver: 'embedded', instances: [] },
        },
        defaultStore: 'main',
      },
      problems: [
        /^stores\.local\.instances needs at least one instance$/,
        /^stores\.main\.projectId is required with driver bigtable \(the project that holds the instances\)$/,
        /^stores\.main\.credentials\.existingSecret is never read with stores\.main\.emulatorHost set: leave one empty$/,
      ],
    },
    {
      name: 'several stores without a default, or with one that is not among them',
      set: { stores: { a: { driver: 'embedded', instances: ['a'] }, b: { driver: 'embedded', instances: ['b'] } } },
      problems: [/^defaultStore is required with more than one store: name the one that serves v1, one of a, b$/],
    },
    {
      name: 'a default store that is not an entry of stores',
      set: { stores: { a: { driver: 'embedded', instances: ['a'] } }, defaultStore: 'main' },
      problems: [/^defaultStore "main" is not an entry of stores: name one of a$/],
    },
    {
      name: 'single-store values beside stores, saying where each goes instead',
      valuesFiles: ['ci/existing-secret-values.yaml'],
      set: { stores: { main: { driver: 'bigtable', projectId: 'my-project', instances: ['my-instance'] } }, dataStore: 'embedded', 'bigtable.emulatorHost': 'emulator:8086', 'embedded.instanceIds': ['local'] },
      problems: [
        /^dataStore=embedded is for a single store: with stores, give the store an entry with driver: embedded$/,
        /^bigtable\.emulatorHost is for a single store: with stores, set it in the store's entry \(stores\.NAME\.emulatorHost\)$/,
        /^bigtable\.instanceIds is for a single store: with stores, set it in the store's entry \(stores\.NAME\.instances\)$/,
        /^credentials\.existingSecret is for a single store: with stores, set it in the store's entry \(stores\.NAME\.credentials\.existingSecret\)$/,
        /^embedded\.instanceIds is for a single store: with stores, set it in the store's entry \(stores\.NAME\.instances\)$/,
        /^gcp\.projectId is for a single store: with stores, set it in the store's entry \(stores\.NAME\.projectId\)$/,
      ],
    },
    {
      name: 'more than one pod, or autoscaling, with an embedded entry of stores',
      valuesFiles: ['ci/stores-values.yaml'],
      set: { replicaCount: 2, 'autoscaling.enabled': true },
      problems: [
        /^replicaCount is 2, but an embedded store \(stores\.local\) runs in exactly one pod: set replicaCount=1$/,
        /^autoscaling\.enabled cannot be used with an embedded store \(stores\.local\) \(one pod only\)$/,
      ],
    },
    {
      name: 'persistence with no embedded entry of stores',
      set: { stores: { main: { driver: 'bigtable', projectId: 'my-project', instances: ['my-instance'] } }, 'embedded.persistence.enabled': true },
      problems: [/^embedded\.persistence\.enabled only applies with an embedded store \(an entry of stores with driver: embedded\)$/],
    },
    {
      name: 'a disruption budget no eviction can meet (minAvailable not below replicaCount)',
      valuesFiles: ['ci/default-values.yaml'],
      set: { replicaCount: 2, podDisruptionBudget: { enabled: true, minAvailable: 2, maxUnavailable: '' } },
      problems: [/^podDisruptionBudget\.minAvailable \(2\) is not below the replicaCount \(2\): no pod could ever be evicted/],
    },
    {
      name: 'a disruption budget no eviction can meet at the autoscaler\'s minimum',
      valuesFiles: ['ci/default-values.yaml'],
      set: { autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 5 }, podDisruptionBudget: { enabled: true, minAvailable: 3, maxUnavailable: '' } },
      problems: [/^podDisruptionBudget\.minAvailable \(3\) is not below the autoscaling\.minReplicas \(2\)/],
    },
    {
      name: 'a disruption budget of minAvailable 100%',
      valuesFiles: ['ci/default-values.yaml'],
      set: { replicaCount: 3, podDisruptionBudget: { enabled: true, minAvailable: '100%', maxUnavailable: '' } },
      problems: [/^podDisruptionBudget\.minAvailable 100% lets no pod be evicted/],
    },
    {
      name: 'a disruption budget of maxUnavailable 0',
      valuesFiles: ['ci/default-values.yaml'],
      set: { replicaCount: 3, podDisruptionBudget: { enabled: true, maxUnavailable: 0 } },
      problems: [/^podDisruptionBudget\.maxUnavailable 0 lets no pod be evicted/],
    },
    {
      name: 'an extraEnv naming a variable twice',
      valuesFiles: ['ci/default-values.yaml'],
      set: { extraEnv: [{ name: 'A', value: '1' }, { name: 'A', value: '2' }] },
      problems: [/^extraEnv names A more than once/],
    },
  ];

  for (const { name, valuesFiles, set, problems } of cases) {
    it(`refuses ${name}`, async () => {
      const result = await template(helm, { ...(valuesFiles ? { valuesFiles } : {}), set });
      expect(result.code, result.stdout).to.not.equal(0);
      const listed = problemsIn(result.stderr);
      expect(listed, result.stderr).to.have.length(problems.length);
      problems.forEach((problem, index) => expect(listed[index]).to.match(problem));
    });
  }

  it('lists every problem at once', async () => {
    const result = await template(helm, {
      set: { 'credentials.existingSecret': 'key', ...WORKLOAD_IDENTITY, 'embedded.persistence.enabled': true, autoscaling: { enabled: true, minReplicas: 4, maxReplicas: 3 } },
    });
    expect(problemsIn(result.stderr).map((problem) => problem.split(' ')[0])).to.deep.equal([
      'gcp.projectId',
      'bigtable.instanceIds',
      'credentials.existingSecret',
      'embedded.persistence.enabled',
      'autoscaling.minReplicas',
    ]);
  });

  it('checks types and names with values.schema.json, unknown keys included', async () => {
    const result = await template(helm, {
      valuesFiles: ['ci/default-values.yaml'],
      set: {
        dataStore: 'mongo',
        'bigtable.instanceIds': ['Bad_Instance'],
        'gcp.projectId': 'projects/x',
        replicaCount: -1,
        'config.timeout': 5,
        'config.trustedProxies': ['ingress.example'],
        'image.digest': 'latest',
      },
    });
    expect(result.code).to.not.equal(0);
    expect(result.stderr).to.contain("values don't meet the specifications of the schema");
    for (const path of ['/dataStore', '/bigtable/instanceIds/0', '/gcp/projectId', '/replicaCount', '/config/trustedProxies/0', '/image/digest']) {
      expect(result.stderr, path).to.contain(`at '${path}'`);
    }
    expect(result.stderr).to.match(/additional properties 'timeout' not allowed/);
  });

  it('checks the names, drivers, instance IDs and fields of stores entries with values.schema.json', async () => {
    const result = await template(helm, {
      set: {
        stores: {
          Main: { driver: 'bigtable', projectId: 'my-project', instances: ['my-instance'] },
          cache: { driver: 'memcached', instances: ['c'] },
          bt: { driver: 'bigtable', projectId: 'projects/x', instances: ['short'], dataDir: '/x' },
          local: { driver: 'embedded', instances: ['Local'], projectId: 'my-project' },
        },
        defaultStore: 'Main',
      },
    });
    expect(result.code).to.not.equal(0);
    expect(result.stderr).to.contain("values don't meet the specifications of the schema");
    for (const path of ['/stores/cache/driver', '/stores/bt/projectId', '/stores/bt/instances/0', '/stores/local/instances/0', '/defaultStore']) {
      expect(result.stderr, path).to.contain(`at '${path}'`);
    }
    expect(result.stderr).to.contain("invalid propertyName 'Main'");
    expect(result.stderr).to.match(/at '\/stores\/bt': additional properties 'dataDir' not allowed/);
    expect(result.stderr).to.match(/at '\/stores\/local': additional properties 'projectId' not allowed/);
  });

  it('checks API keys, grants and the auth settings with values.schema.json', async () => {
    const result = await template(helm, {
      valuesFiles: ['ci/default-values.yaml'],
      set: {
        'auth.mode': 'API keys',
        'auth.apiKeys.keys': [{ name: 'orders svc', sha256: 'not-a-digest', role: 'owner', instances: [], key: 'plaintext' }],
        'auth.oidc.issuer': 'http://issuer.example.com',
        'auth.oidc.grants': [{ subject: 'a', email: 'a@example.com', role: 'reader', instances: ['*'] }, { role: 'reader', instances: ['*'] }],
        'config.maxInflight': 0,
        'config.rateLimitPerSecond': -1,
        'config.maxInflightUnauthenticated': 0,
        'config.minBodyBytesPerSecond': -1,
      },
    });
    expect(result.code).to.not.equal(0);
    expect(result.stderr).to.contain("values don't meet the specifications of the schema");
    for (const path of [
      '/auth/mode',
      '/auth/apiKeys/keys/0/name',
      '/auth/apiKeys/keys/0/sha256',
      '/auth/apiKeys/keys/0/role',
      '/auth/apiKeys/keys/0/instances',
      '/auth/oidc/issuer',
      '/auth/oidc/grants/0',
      '/auth/oidc/grants/1',
      '/config/maxInflight',
      '/config/rateLimitPerSecond',
      '/config/maxInflightUnauthenticated',
      '/config/minBodyBytesPerSecond',
    ]) {
      expect(result.stderr, path).to.contain(`at '${path}'`);
    }
    expect(result.stderr).to.match(/additional properties 'key' not allowed/);
  });

  it('checks the observability values with values.schema.json', async () => {
    const result = await template(helm, {
      valuesFiles: ['ci/default-values.yaml'],
      set: {
        logLevel: 'verbose',
        'metrics.port': 70_000,
        tracing: { otlpEndpoint: 'collector:4318', protocol: 'zipkin', sampler: 'ratio', samplerArg: 2, resourceAttributes: { 'team name': 'a,b' } },
        'tracing.headersSecret.existingSecret': 'Otel_Auth',
        'podMonitoring.interval': '30',
      },
    });
    expect(result.code).to.not.equal(0);
    expect(result.stderr).to.contain("values don't meet the specifications of the schema");
    for (const path of [
      '/logLevel',
      '/metrics/port',
      '/tracing/otlpEndpoint',
      '/tracing/protocol',
      '/tracing/sampler',
      '/tracing/samplerArg',
      '/tracing/resourceAttributes',
      '/tracing/headersSecret/existingSecret',
      '/podMonitoring/interval',
    ]) {
      expect(result.stderr, path).to.contain(`at '${path}`);
    }
  });

  describe('NOTES.txt', () => {
    it('says how Bigtable is reached and what Workload Identity still needs', async () => {
      const text = await notes(helm, { valuesFiles: ['ci/workload-identity-values.yaml'] });
      expect(text).to.contain('Data store: Cloud Bigtable, project my-project, instances orders-prod,users-prod, as kvcrud@my-project.iam.gserviceaccount.com (Workload Identity).');
      expect(text).to.contain('The Kubernetes ServiceAccount apps/kvcrud needs roles/iam.workloadIdentityUser on it.');
      expect(text).to.contain('kubectl --namespace apps port-forward service/kvcrud 8080:8080');
    });

    it('warns that the embedded store without persistence loses its data', async () => {
      expect(await notes(helm, { set: { dataStore: 'embedded' } })).to.contain('WARNING: embedded.persistence.enabled is false');
      expect(await notes(helm, { valuesFiles: ['ci/embedded-values.yaml'] }))
        .to.contain('on the PersistentVolumeClaim kvcrud-data.')
        .and.not.contain('WARNING: embedded.persistence');
    });
  });
});
