import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { CONFIG_VARIABLES, ConfigError, loadConfig } from '../../src/config.ts';
import { DRIVERS } from '../../src/store/drivers.ts';

const BASE = { GOOGLE_CLOUD_PROJECT: 'my-project', INSTANCE_IDS: 'inst-a' };

/** The one store the v1 variables define: named after its driver, and the default. */
function onlyStore(driver: string, instances: string[], settings: Record<string, unknown>) {
  const store = { name: driver, driver, instances, settings };
  return { default: store, all: [store] };
}

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return [...(error as ConfigError).problems];
  }
  throw new Error('loadConfig accepted the configuration');
}

describe('loadConfig', () => {
  it('reads TRUSTED_PROXIES as a list of addresses, ranges and named ranges, and refuses anything else', () => {
    expect(loadConfig({ ...BASE, TRUSTED_PROXIES: 'loopback, 10.0.0.0/8,fd00::1' }).trustedProxies).to.deep.equal(['loopback', '10.0.0.0/8', 'fd00::1']);
    expect(problemsOf({ ...BASE, TRUSTED_PROXIES: 'loopback,,10.0.0.1' })).to.deep.equal(['TRUSTED_PROXIES has an empty entry']);
    expect(problemsOf({ ...BASE, TRUSTED_PROXIES: '10.0.0.0/33' })).to.deep.equal([
      'TRUSTED_PROXIES entry "10.0.0.0/33" is not an IP address, a CIDR range, or one of loopback, linklocal, uniquelocal',
    ]);
    expect(problemsOf({ ...BASE, TRUSTED_PROXIES: 'ingress.local' })).to.have.length(1);
  });

  it('applies the defaults', () => {
    expect(loadConfig(BASE)).to.deep.equal({
      port: 8080,
      maxBodyBytes: 10 * 1024 * 1024,
      storeTimeoutMs: 5000,
      maxInflight: 256,
      maxInflightPerCaller: 128,
      maxInflightUnauthenticated: 16,
      feedsMax: 1000,
      feedsMaxPerCaller: 100,
      minBodyBytesPerSecond: 16 * 1024,
      rateLimitPerSecond: undefined,
      trustedProxies: [],
      instanceIds: ['inst-a'],
      stores: onlyStore('bigtable', ['inst-a'], { projectId: 'my-project' }),
      shutdownTimeoutMs: 25_000,
      v1MaxVersions: 1,
      auth: { modes: [], protectDocs: false },
      logLevel: 'info',
    });
  });

  it('chooses the embedded store in ./data serving "local" when nothing is configured', () => {
    expect(loadConfig({})).to.deep.equal({
      port: 8080,
      maxBodyBytes: 10 * 1024 * 1024,
      storeTimeoutMs: 5000,
      maxInflight: 256,
      maxInflightPerCaller: 128,
      maxInflightUnauthenticated: 16,
      feedsMax: 1000,
      feedsMaxPerCaller: 100,
      minBodyBytesPerSecond: 16 * 1024,
      rateLimitPerSecond: undefined,
      trustedProxies: [],
      instanceIds: ['local'],
      stores: onlyStore('embedded', ['local'], { dataDir: './data' }),
      shutdownTimeoutMs: 25_000,
      v1MaxVersions: 1,
      auth: { modes: [], protectDocs: false },
      logLevel: 'info',
    });
  });

  it('reads the overload bounds: MAX_INFLIGHT and, when set, RATE_LIMIT_PER_SECOND', () => {
    expect(loadConfig({ ...BASE, MAX_INFLIGHT: '64', RATE_LIMIT_PER_SECOND: '100' })).to.deep.include({
      maxInflight: 64,
      rateLimitPerSecond: 100,
    });
    expect(problemsOf({ ...BASE, MAX_INFLIGHT: '0', RATE_LIMIT_PER_SECOND: '1.5' })).to.deep.equal([
      'MAX_INFLIGHT must be greater than or equal to 1',
      'RATE_LIMIT_PER_SECOND must be an integer',
    ]);
  });

  it('reads the fairness bounds, the share per caller defaulting to half of MAX_INFLIGHT', () => {
    expect(loadConfig({ ...BASE, MAX_INFLIGHT: '4' })).to.deep.include({ maxInflight: 4, maxInflightPerCaller: 2 });
    expect(loadConfig({ ...BASE, MAX_INFLIGHT: '1' })).to.deep.include({ maxInflightPerCaller: 1 });
    expect(loadConfig({ ...BASE, MAX_INFLIGHT: '7' })).to.deep.include({ maxInflightPerCaller: 4 });
    expect(
      loadConfig({ ...BASE, MAX_INFLIGHT: '64', MAX_INFLIGHT_PER_CALLER: '64', MAX_INFLIGHT_UNAUTHENTICATED: '4', MIN_BODY_BYTES_PER_SECOND: '0' }),
    ).to.deep.include({ maxInflightPerCaller: 64, maxInflightUnauthenticated: 4, minBodyBytesPerSecond: 0 });
    expect(
      problemsOf({ ...BASE, MAX_INFLIGHT: '8', MAX_INFLIGHT_PER_CALLER: '9', MAX_INFLIGHT_UNAUTHENTICATED: '0', MIN_BODY_BYTES_PER_SECOND: '1.5' }),
    ).to.deep.equal([
      'MAX_INFLIGHT_PER_CALLER must be at most MAX_INFLIGHT',
      'MAX_INFLIGHT_UNAUTHENTICATED must be greater than or equal to 1',
      'MIN_BODY_BYTES_PER_SECOND must be an integer',
    ]);
    expect(problemsOf({ ...BASE, MAX_INFLIGHT_PER_CALLER: '0', MIN_BODY_BYTES_PER_SECOND: '-1' })).to.deep.equal([
      'MAX_INFLIGHT_PER_CALLER must be greater than or equal to 1',
      'MIN_BODY_BYTES_PER_SECOND must be greater than or equal to 0',
    ]);
  });

  it('chooses Bigtable when a project or an emulator is configured, unless DATA_STORE says otherwise', () => {
    expect(loadConfig(BASE).stores.default.driver).to.equal('bigtable');
    expect(problemsOf({ BIGTABLE_EMULATOR_HOST: 'localhost:8086' })).to.deep.equal([
      'INSTANCE_IDS is required',
      'GOOGLE_CLOUD_PROJECT is required',
    ]);
    expect(loadConfig({ ...BASE, DATA_STORE: 'embedded', DATA_DIR: '/var/lib/kvcrud' })).to.deep.include({
      instanceIds: ['inst-a'],
      stores: onlyStore('embedded', ['inst-a'], { dataDir: '/var/lib/kvcrud' }),
    });
  });

  it('allows short instance IDs for the embedded store only', () => {
    expect(loadConfig({ INSTANCE_IDS: 'a,b-2' }).instanceIds).to.deep.equal(['a', 'b-2']);
    expect(problemsOf({ ...BASE, INSTANCE_IDS: 'local' })[0]).to.match(/^INSTANCE_IDS entry "local" is not a valid instance ID \(6-33/);
    expect(problemsOf({ INSTANCE_IDS: 'b-' })[0]).to.match(/^INSTANCE_IDS entry "b-" is not a valid instance ID \(1-33/);
  });

  it('reads every variable', () => {
    const config = loadConfig({
      ...BASE,
      PORT: '9000',
      MAX_BODY_BYTES: '2048',
      STORE_TIMEOUT_MS: '250',
      INSTANCE_IDS: ' inst-a , inst-b ',
      DATA_STORE: 'bigtable',
      BIGTABLE_EMULATOR_HOST: 'localhost:8086',
      SHUTDOWN_TIMEOUT_MS: '0',
      LOG_LEVEL: 'DEBUG',
      METRICS_PORT: '9090',
    });
    expect(config).to.deep.include({ port: 9000, maxBodyBytes: 2048, storeTimeoutMs: 250, instanceIds: ['inst-a', 'inst-b'] });
    expect(config.shutdownTimeoutMs).to.equal(0);
    expect(config.stores.default.settings).to.deep.equal({ projectId: 'my-project', emulatorHost: 'localhost:8086' });
    expect(config).to.deep.include({ logLevel: 'debug', metricsPort: 9090 });
  });

  it('returns a frozen object', () => {
    const config = loadConfig(BASE);
    expect(Object.isFrozen(config)).to.equal(true);
    expect(Object.isFrozen(config.instanceIds)).to.equal(true);
    expect(Object.isFrozen(config.stores)).to.equal(true);
    expect(Object.isFrozen(config.stores.default.settings)).to.equal(true);
    expect(Object.isFrozen(config.auth)).to.equal(true);
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig({ ...BASE, PORT: '', BIGTABLE_EMULATOR_HOST: '  ' }).port).to.equal(8080);
  });

  it('names each missing required variable', () => {
    expect(problemsOf({ DATA_STORE: 'bigtable' })).to.deep.equal(['INSTANCE_IDS is required', 'GOOGLE_CLOUD_PROJECT is required']);
  });

  it('names each invalid variable and what is wrong with it', () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ PORT: '80a' }, /^PORT must be a number$/],
      [{ PORT: '70000' }, /^PORT must be less than or equal to 65535$/],
      [{ MAX_BODY_BYTES: '-1' }, /^MAX_BODY_BYTES must be greater than or equal to 1024$/],
      [{ STORE_TIMEOUT_MS: '1.5' }, /^STORE_TIMEOUT_MS must be an integer$/],
      [{ DATA_STORE: 'cassandra' }, /^DATA_STORE must be one of \[bigtable, embedded\]$/],
      [{ INSTANCE_IDS: 'inst-a,,inst-b' }, /^INSTANCE_IDS entry "" is not a valid instance ID/],
      [{ INSTANCE_IDS: 'Bad_Instance' }, /^INSTANCE_IDS entry "Bad_Instance" is not a valid instance ID/],
      [{ INSTANCE_IDS: 'inst-a,inst-a' }, /^INSTANCE_IDS lists an instance ID more than once$/],
      [{ GOOGLE_CLOUD_PROJECT: 'projects/x' }, /^GOOGLE_CLOUD_PROJECT "projects\/x" is not a valid project ID$/],
      [{ BIGTABLE_EMULATOR_HOST: 'localhost' }, /^BIGTABLE_EMULATOR_HOST must be host:port, got "localhost"$/],
      [{ SHUTDOWN_TIMEOUT_MS: '-1' }, /^SHUTDOWN_TIMEOUT_MS must be greater than or equal to 0$/],
      [{ SHUTDOWN_TIMEOUT_MS: '1h' }, /^SHUTDOWN_TIMEOUT_MS must be a number$/],
      [{ LOG_LEVEL: 'verbose' }, /^LOG_LEVEL must be one of \[fatal, error, warn, info, debug, trace, silent\]$/],
      [{ METRICS_PORT: '8080' }, /^METRICS_PORT must differ from PORT$/],
      [{ PORT: '9000', METRICS_PORT: '9000' }, /^METRICS_PORT must differ from PORT$/],
      [{ METRICS_PORT: '65536' }, /^METRICS_PORT must be less than or equal to 65535$/],
    ];
    for (const [override, expected] of cases) {
      const problems = problemsOf({ ...BASE, ...override });
      expect(problems, JSON.stringify(override)).to.have.length(1);
      expect(problems[0], JSON.stringify(override)).to.match(expected);
    }
  });

  it('lets PORT and METRICS_PORT both be 0 (a free port each)', () => {
    expect(loadConfig({ ...BASE, PORT: '0', METRICS_PORT: '0' })).to.deep.include({ port: 0, metricsPort: 0 });
  });

  it('reports every problem at once, in one line', () => {
    try {
      loadConfig({ PORT: 'x', INSTANCE_IDS: 'ok-instance', DATA_STORE: 'bigtable' });
      expect.fail('accepted');
    } catch (error) {
      expect((error as Error).message).to.equal('invalid configuration: PORT must be a number; GOOGLE_CLOUD_PROJECT is required');
    }
  });

  it('checks a credentials file only when no emulator is configured', () => {
    const missing = '/nonexistent/key.json';
    expect(problemsOf({ ...BASE, GOOGLE_APPLICATION_CREDENTIALS: missing })).to.deep.equal([
      `GOOGLE_APPLICATION_CREDENTIALS file "${missing}" cannot be read`,
    ]);
    const emulated = loadConfig({ ...BASE, GOOGLE_APPLICATION_CREDENTIALS: missing, BIGTABLE_EMULATOR_HOST: 'localhost:1' });
    expect(emulated.stores.default.settings).to.not.have.property('credentialsFile');
  });

  it('passes a readable credentials file on', () => {
    const file = new URL(import.meta.url).pathname;
    expect(loadConfig({ ...BASE, GOOGLE_APPLICATION_CREDENTIALS: file }).stores.default.settings).to.include({ credentialsFile: file });
  });

  describe('auth variables', () => {
    const OIDC = {
      AUTH_MODE: 'oidc',
      AUTH_OIDC_ISSUER: 'https://issuer.example',
      AUTH_OIDC_AUDIENCE: 'kvcrud',
      AUTH_OIDC_GRANTS_FILE: '/etc/kvcrud/grants.json',
    };

    it('reads apikey mode', () => {
      const config = loadConfig({ ...BASE, AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: '/etc/kvcrud/keys.json', AUTH_PROTECT_DOCS: 'true' });
      expect(config.auth).to.deep.equal({ modes: ['apikey'], apiKeysFile: '/etc/kvcrud/keys.json', protectDocs: true });
    });

    it('reads oidc mode, with a list of audiences and the optional variables', () => {
      const config = loadConfig({
        ...BASE,
        ...OIDC,
        AUTH_OIDC_AUDIENCE: 'kvcrud, https://kvcrud.example',
        AUTH_OIDC_JWKS_URI: 'https://kubernetes.default.svc/openid/v1/jwks',
        AUTH_OIDC_JWKS_TOKEN_FILE: '/var/run/secrets/kubernetes.io/serviceaccount/token',
      });
      expect(config.auth).to.deep.equal({
        modes: ['oidc'],
        protectDocs: false,
        oidc: {
          issuer: 'https://issuer.example',
          audiences: ['kvcrud', 'https://kvcrud.example'],
          grantsFile: '/etc/kvcrud/grants.json',
          jwksUri: 'https://kubernetes.default.svc/openid/v1/jwks',
          jwksTokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token',
        },
      });
    });

    it('reads both modes at once', () => {
      const config = loadConfig({ ...BASE, ...OIDC, AUTH_MODE: 'apikey,oidc', AUTH_API_KEYS_FILE: '/k.json' });
      expect(config.auth.modes).to.deep.equal(['apikey', 'oidc']);
    });

    it('takes AUTH_MODE none as no modes', () => {
      expect(loadConfig({ ...BASE, AUTH_MODE: 'none' }).auth).to.deep.equal({ modes: [], protectDocs: false });
    });

    it('accepts plain http only for an issuer on this machine', () => {
      expect(loadConfig({ ...BASE, ...OIDC, AUTH_OIDC_ISSUER: 'http://127.0.0.1:5556' }).auth.oidc?.issuer).to.equal('http://127.0.0.1:5556');
    });

    it('names each wrong auth variable', () => {
      const cases: Array<[Record<string, string>, string[]]> = [
        [{ AUTH_MODE: 'ldap' }, ['AUTH_MODE entry "ldap" is not one of none, apikey, oidc']],
        [{ AUTH_MODE: 'none,apikey', AUTH_API_KEYS_FILE: '/k' }, ['AUTH_MODE cannot combine none with other modes']],
        [{ AUTH_MODE: 'apikey,apikey', AUTH_API_KEYS_FILE: '/k' }, ['AUTH_MODE lists a mode more than once']],
        [{ AUTH_MODE: 'apikey' }, ['AUTH_API_KEYS_FILE is required when AUTH_MODE includes apikey']],
        [
          { AUTH_MODE: 'oidc' },
          [
            'AUTH_OIDC_ISSUER is required when AUTH_MODE includes oidc',
            'AUTH_OIDC_AUDIENCE is required when AUTH_MODE includes oidc',
            'AUTH_OIDC_GRANTS_FILE is required when AUTH_MODE includes oidc',
          ],
        ],
        // Set but not switched on: the operator believes the service is protected.
        [{ AUTH_API_KEYS_FILE: '/k' }, ['AUTH_API_KEYS_FILE is set but AUTH_MODE does not include apikey']],
        [{ AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: '/k', AUTH_OIDC_JWKS_URI: 'https://x' }, ['AUTH_OIDC_JWKS_URI is set but AUTH_MODE does not include oidc']],
        [{ AUTH_PROTECT_DOCS: 'true' }, ['AUTH_PROTECT_DOCS needs AUTH_MODE apikey or oidc']],
        [{ ...OIDC, AUTH_OIDC_ISSUER: 'http://issuer.example' }, ['AUTH_OIDC_ISSUER must be an https URL (or http to localhost), got "http://issuer.example"']],
        [{ ...OIDC, AUTH_OIDC_JWKS_URI: 'not a url' }, ['AUTH_OIDC_JWKS_URI must be an https URL (or http to localhost), got "not a url"']],
        [{ ...OIDC, AUTH_OIDC_AUDIENCE: 'a,,b' }, ['AUTH_OIDC_AUDIENCE has an empty entry']],
        [{ AUTH_PROTECT_DOCS: 'maybe' }, ['AUTH_PROTECT_DOCS must be a boolean']],
      ];
      for (const [override, expected] of cases) {
        expect(problemsOf({ ...BASE, ...override }), JSON.stringify(override)).to.deep.equal(expected);
      }
    });
  });
});

describe('STORES_FILE', () => {
  let directory: string;
  before(() => {
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-stores-'));
  });
  after(() => rmSync(directory, { recursive: true, force: true }));

  let files = 0;
  /** Writes `text` to a fresh file and returns the environment naming it. */
  function storesFile(text: string, extension = 'yaml'): Record<string, string> {
    files += 1;
    const path = join(directory, `stores-${files}.${extension}`);
    writeFileSync(path, text);
    return { STORES_FILE: path };
  }

  it('reads several named stores, each with its driver, instances and settings, and the default', () => {
    const config = loadConfig(
      storesFile(`
default: main
stores:
  main: { driver: bigtable, projectId: my-proj, instances: [orders-prod, orders-test], emulatorHost: "localhost:8086" }
  local: { driver: embedded, dataDir: ./local-data, instances: [local] }
  scratch:
    driver: embedded
    instances: [a, b]
`),
    );
    const main = { name: 'main', driver: 'bigtable', instances: ['orders-prod', 'orders-test'], settings: { projectId: 'my-proj', emulatorHost: 'localhost:8086' } };
    expect(config.stores).to.deep.equal({
      default: main,
      all: [
        main,
        { name: 'local', driver: 'embedded', instances: ['local'], settings: { dataDir: './local-data' } },
        // The driver's defaults apply.
        { name: 'scratch', driver: 'embedded', instances: ['a', 'b'], settings: { dataDir: './data' } },
      ],
    });
    // v1 serves the default store's instances.
    expect(config.instanceIds).to.deep.equal(['orders-prod', 'orders-test']);
    expect(Object.isFrozen(config.stores.all[1]?.instances)).to.equal(true);
  });

  it('reads JSON, and needs no default when there is one store', () => {
    const config = loadConfig(storesFile(JSON.stringify({ stores: { only: { driver: 'embedded', instances: ['local'] } } }), 'json'));
    expect(config.stores.default).to.deep.equal({ name: 'only', driver: 'embedded', instances: ['local'], settings: { dataDir: './data' } });
  });

  it('names the store and the field of each problem, all at once', () => {
    const env = storesFile(`
default: main
stores:
  main: { driver: bigtable, instances: [local, orders-prod, orders-prod], emulatorHost: localhost }
  Bad_Name: { driver: embedded, instances: [local] }
  cache: { driver: memcached, instances: [c] }
  disk: { driver: embedded, instances: [-x], dataDir: 7, colour: blue }
  none: { driver: embedded }
  empty: { driver: embedded, instances: [] }
  bare: 3
`);
    expect(problemsOf(env)).to.deep.equal([
      'STORES_FILE: stores.main.instances[2] repeats an earlier instance',
      'STORES_FILE: stores.main.instances[0] "local" is not a valid bigtable instance ID (6-33 characters: lowercase letters, digits and hyphens, starting with a letter)',
      'STORES_FILE: stores.main.projectId is required',
      'STORES_FILE: stores.main.emulatorHost must be host:port, got "localhost"',
      'STORES_FILE: stores.Bad_Name is not a valid store name (1-32 characters: lowercase letters, digits and hyphens)',
      `STORES_FILE: stores.cache.driver must be one of [${DRIVERS.map((driver) => driver.name).join(', ')}]`,
      'STORES_FILE: stores.disk.instances[0] "-x" is not a valid embedded instance ID (1-33 characters: lowercase letters, digits and hyphens, starting with a letter)',
      'STORES_FILE: stores.disk.dataDir must be a string',
      'STORES_FILE: stores.disk.colour is an unknown field',
      'STORES_FILE: stores.none.instances is required',
      'STORES_FILE: stores.empty.instances must contain at least 1 items',
      "STORES_FILE: stores.bare must be a map of the store's driver, instances and settings",
    ]);
  });

  it('names a misspelt field as unknown, with the field it most likely means, also when it is the driver', () => {
    const env = storesFile(`
stores:
  main: { drver: embedded, instances: [local] }
  disk: { driver: embedded, instances: [local], datadir: ./data }
default: main
`);
    expect(problemsOf(env)).to.deep.equal([
      'STORES_FILE: stores.main.driver is required',
      'STORES_FILE: stores.main.drver is an unknown field (did you mean driver?)',
      'STORES_FILE: stores.disk.datadir is an unknown field (did you mean dataDir?)',
    ]);
  });

  it("checks each entry with its driver's rules: instance IDs, project, emulator host, credentials file", () => {
    const env = storesFile(`
stores:
  main: { driver: bigtable, instances: [local], projectId: "projects/x", emulatorHost: localhost }
  real: { driver: bigtable, instances: [orders-prod], projectId: my-proj, credentialsFile: /nonexistent/key.json }
default: main
`);
    expect(problemsOf(env)).to.deep.equal([
      'STORES_FILE: stores.main.instances[0] "local" is not a valid bigtable instance ID (6-33 characters: lowercase letters, digits and hyphens, starting with a letter)',
      'STORES_FILE: stores.main.projectId "projects/x" is not a valid project ID',
      'STORES_FILE: stores.main.emulatorHost must be host:port, got "localhost"',
      'STORES_FILE: stores.real.credentialsFile file "/nonexistent/key.json" cannot be read',
    ]);
  });

  it('needs a default naming one of several stores', () => {
    const two = 'stores: { a: { driver: embedded, instances: [a], dataDir: ./a }, b: { driver: embedded, instances: [b], dataDir: ./b } }';
    expect(problemsOf(storesFile(two))).to.deep.equal(['STORES_FILE: default is required when there is more than one store: name one of a, b']);
    expect(problemsOf(storesFile(`default: c\n${two}`))).to.deep.equal(['STORES_FILE: default "c" is not a store of the file: name one of a, b']);
  });

  it('refuses two stores on one embedded data directory, however it is written', () => {
    const env = storesFile(`
default: a
stores:
  a: { driver: embedded, instances: [a] }
  b: { driver: embedded, instances: [b], dataDir: data/ }
`);
    expect(problemsOf(env)).to.deep.equal([`STORES_FILE: stores.b.dataDir "${resolve('data')}" is already used by store "a": two stores cannot share it`]);
  });

  it('refuses the variables that define the store without it, saying what to write instead', () => {
    const env = { ...storesFile('stores: { only: { driver: embedded, instances: [local] } }'), DATA_STORE: 'embedded', DATA_DIR: './x', BIGTABLE_EMULATOR_HOST: 'localhost:8086', INSTANCE_IDS: 'a' };
    expect(problemsOf(env)).to.deep.equal([
      "DATA_STORE cannot be set with STORES_FILE: set driver in the store's entry instead",
      "INSTANCE_IDS cannot be set with STORES_FILE: set instances in the store's entry instead",
      "BIGTABLE_EMULATOR_HOST cannot be set with STORES_FILE: set emulatorHost in the store's entry instead",
      "DATA_DIR cannot be set with STORES_FILE: set dataDir in the store's entry instead",
    ]);
  });

  it('says when the file cannot be read or parsed, or has the wrong shape', () => {
    const missing = join(directory, 'missing.yaml');
    expect(problemsOf({ STORES_FILE: missing })).to.deep.equal([`STORES_FILE "${missing}" cannot be read: ENOENT`]);
    const broken = storesFile('stores: { a: [');
    expect(problemsOf(broken)[0]).to.match(new RegExp(`^STORES_FILE "${broken['STORES_FILE']}" is not valid YAML or JSON: `));
    const repeated = storesFile('stores:\n  a: { driver: embedded, instances: [a] }\n  a: { driver: embedded, instances: [b] }\n');
    expect(problemsOf(repeated)).to.have.length(1);
    expect(problemsOf(repeated)[0]).to.match(/is not valid YAML or JSON: Map keys must be unique/);
    expect(problemsOf(storesFile('stores: {}\nextra: 1'))).to.deep.equal([
      'STORES_FILE: stores must name at least one store',
      'STORES_FILE: extra is not allowed',
    ]);
    for (const text of ['- a', '']) expect(problemsOf(storesFile(text))).to.deep.equal(['STORES_FILE: the file must be a map of stores (and default)']);
    expect(problemsOf(storesFile('stores: 3'))).to.deep.equal(['STORES_FILE: stores must be of type object']);
  });

  it('lists STORES_FILE and the variables it replaces among the variables the service reads', () => {
    expect(CONFIG_VARIABLES).to.include.members(['STORES_FILE', 'DATA_STORE', 'INSTANCE_IDS', 'DATA_DIR', 'GOOGLE_CLOUD_PROJECT', 'BIGTABLE_EMULATOR_HOST', 'GOOGLE_APPLICATION_CREDENTIALS']);
  });
});
