import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findDriver } from '../../../src/store/drivers.ts';
import { redisDriver } from '../../../src/store/redis/driver.ts';

describe('redis driver settings', () => {
  let dir: string;
  let authFile: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kvcrud-redis-driver-'));
    authFile = join(dir, 'auth');
    writeFileSync(authFile, 'secret-auth-string\n');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const validate = (settings: Record<string, unknown>) => redisDriver.settings.validate(settings, { abortEarly: false });
  const messages = (settings: Record<string, unknown>) => validate(settings).error?.details.map((detail) => detail.message) ?? [];

  it('is listed among the drivers as "redis"', () => {
    expect(findDriver('redis')).to.equal(redisDriver);
  });

  it('accepts redis:// and rediss:// URLs with a database number, an AUTH string file and a CA file', () => {
    expect(validate({ url: 'redis://10.0.0.3:6379' }).error).to.equal(undefined);
    expect(validate({ url: 'redis://10.0.0.3:6379/2', authStringFile: authFile }).error).to.equal(undefined);
    expect(validate({ url: 'rediss://10.0.0.3:6378', authStringFile: authFile, caFile: authFile }).error).to.equal(undefined);
    expect(validate({ url: 'redis://10.0.0.3:6379' }).value).to.deep.equal({ url: 'redis://10.0.0.3:6379', cluster: false });
    expect(validate({ url: 'rediss://10.0.0.3:6379', cluster: true }).error).to.equal(undefined);
  });

  it('refuses a database number for a cluster, which has database 0 only', () => {
    expect(messages({ url: 'redis://10.0.0.3:6379/1', cluster: true })).to.deep.equal(['"url" of a cluster cannot name a database: a Redis Cluster has only database 0']);
  });

  it('refuses a missing URL, another scheme, a password in the URL and a path that is not a database number', () => {
    expect(messages({})).to.deep.equal(['"url" is required']);
    expect(messages({ url: 'http://10.0.0.3:6379' })).to.deep.equal(['"url" must start with redis:// or rediss://, got "http://"']);
    expect(messages({ url: 'redis://:hunter2@10.0.0.3:6379' })).to.deep.equal([
      '"url" must not hold a password: put the AUTH string in a file and name it in authStringFile',
    ]);
    expect(messages({ url: 'redis://10.0.0.3:6379/orders' })).to.deep.equal(['"url" may end only in a database number (/0 to /15), got "/orders"']);
    expect(messages({ url: 'not a url' })).to.deep.equal(['"url" must be a URL: redis://host:port or rediss://host:port']);
  });

  it('refuses a CA file without TLS, unreadable files and unknown settings', () => {
    expect(messages({ url: 'redis://10.0.0.3:6379', caFile: authFile })).to.deep.equal(['"caFile" needs a rediss:// url (TLS)']);
    expect(messages({ url: 'redis://10.0.0.3:6379', authStringFile: join(dir, 'missing') })).to.deep.equal([
      `"authStringFile" file "${join(dir, 'missing')}" cannot be read`,
    ]);
    expect(messages({ url: 'redis://10.0.0.3:6379', password: 'x' })).to.deep.equal(['"password" is not allowed']);
  });

  it('describes a store for the start-up log without any secret', () => {
    const described = JSON.stringify(redisDriver.describe({ url: 'rediss://user@10.0.0.3:6378/1', authStringFile: authFile, caFile: '/etc/ca.pem', cluster: false }));
    expect(JSON.parse(described)).to.deep.equal({ url: 'rediss://10.0.0.3:6378/1', cluster: false, auth: 'AUTH string from a file', caFile: '/etc/ca.pem' });
    expect(described).not.to.include('secret-auth-string');
  });

  it('takes instance IDs that can be part of a key name and a hash tag', () => {
    const { pattern } = redisDriver.instanceId;
    expect(['sessions', 'a', 'orders-2024'].every((id) => pattern.test(id))).to.equal(true);
    expect(['Sessions', 'a{b}', 'a/b', 'a:b', '-a', 'a-', ''].some((id) => pattern.test(id))).to.equal(false);
  });
});
