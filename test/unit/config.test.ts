import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../src/config.ts';

const BASE = { GOOGLE_CLOUD_PROJECT: 'my-project', INSTANCE_IDS: 'inst-a' };

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
  it('applies the defaults', () => {
    expect(loadConfig(BASE)).to.deep.equal({
      port: 8080,
      maxBodyBytes: 10 * 1024 * 1024,
      storeTimeoutMs: 5000,
      instanceIds: ['inst-a'],
      dataStore: 'bigtable',
      bigtable: { projectId: 'my-project' },
      logLevel: 'info',
    });
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
      LOG_LEVEL: 'DEBUG',
      METRICS_PORT: '9090',
    });
    expect(config).to.deep.include({ port: 9000, maxBodyBytes: 2048, storeTimeoutMs: 250, instanceIds: ['inst-a', 'inst-b'] });
    expect(config).to.deep.include({ logLevel: 'debug', metricsPort: 9090 });
    expect(config.bigtable).to.deep.equal({ projectId: 'my-project', emulatorHost: 'localhost:8086' });
  });

  it('returns a frozen object', () => {
    const config = loadConfig(BASE);
    expect(Object.isFrozen(config)).to.equal(true);
    expect(Object.isFrozen(config.instanceIds)).to.equal(true);
    expect(Object.isFrozen(config.bigtable)).to.equal(true);
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig({ ...BASE, PORT: '', BIGTABLE_EMULATOR_HOST: '  ' }).port).to.equal(8080);
  });

  it('names each missing required variable', () => {
    expect(problemsOf({})).to.deep.equal(['INSTANCE_IDS is required', 'GOOGLE_CLOUD_PROJECT is required']);
  });

  it('names each invalid variable and what is wrong with it', () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ PORT: '80a' }, /^PORT must be a number$/],
      [{ PORT: '70000' }, /^PORT must be less than or equal to 65535$/],
      [{ MAX_BODY_BYTES: '-1' }, /^MAX_BODY_BYTES must be greater than or equal to 1024$/],
      [{ STORE_TIMEOUT_MS: '1.5' }, /^STORE_TIMEOUT_MS must be an integer$/],
      [{ DATA_STORE: 'cassandra' }, /^DATA_STORE must be \[bigtable\]$/],
      [{ INSTANCE_IDS: 'inst-a,,inst-b' }, /^INSTANCE_IDS entry "" is not a valid instance ID/],
      [{ INSTANCE_IDS: 'Bad_Instance' }, /^INSTANCE_IDS entry "Bad_Instance" is not a valid instance ID/],
      [{ INSTANCE_IDS: 'inst-a,inst-a' }, /^INSTANCE_IDS lists an instance ID more than once$/],
      [{ GOOGLE_CLOUD_PROJECT: 'projects/x' }, /^GOOGLE_CLOUD_PROJECT "projects\/x" is not a valid project ID$/],
      [{ BIGTABLE_EMULATOR_HOST: 'localhost' }, /^BIGTABLE_EMULATOR_HOST must be host:port, got "localhost"$/],
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
      loadConfig({ PORT: 'x', INSTANCE_IDS: 'ok-instance' });
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
    expect(emulated.bigtable).to.not.have.property('credentialsFile');
  });

  it('passes a readable credentials file on', () => {
    const file = new URL(import.meta.url).pathname;
    expect(loadConfig({ ...BASE, GOOGLE_APPLICATION_CREDENTIALS: file }).bigtable.credentialsFile).to.equal(file);
  });
});
