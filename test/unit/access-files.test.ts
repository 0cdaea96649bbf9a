import { expect } from 'chai';
import { AccessFileError, parseApiKeysFile, parseGrantsFile, unservedInstances } from '../../src/auth/access-files.ts';
import { findApiKeyHolder } from '../../src/auth/api-keys.ts';
import { newApiKey, sha256Hex } from '../support/access-files.ts';

const DIGEST = 'a'.repeat(64);

function problemsOf(parse: () => unknown): string[] {
  try {
    parse();
  } catch (error) {
    expect(error).to.be.instanceOf(AccessFileError);
    return [...(error as AccessFileError).problems];
  }
  throw new Error('the file was accepted');
}

describe('the API keys file', () => {
  it('reads names, digests, roles and instances', () => {
    const keys = parseApiKeysFile(
      JSON.stringify({ keys: [{ name: 'orders-svc', sha256: DIGEST.toUpperCase(), role: 'writer', instances: ['inst-a', 'inst-b'] }] }),
    );
    expect(keys).to.have.length(1);
    expect(keys[0]?.name).to.equal('orders-svc');
    expect(keys[0]?.sha256.toString('hex')).to.equal(DIGEST);
    expect(keys[0]?.grant).to.deep.equal({ role: 'writer', instances: ['inst-a', 'inst-b'] });
  });

  it('accepts an empty list: nobody may call', () => {
    expect(parseApiKeysFile('{"keys":[]}')).to.deep.equal([]);
  });

  it('names every problem by its place in the file', () => {
    const entry = { name: 'a', sha256: DIGEST, role: 'reader', instances: ['*'] };
    const cases: Array<[unknown, string[]]> = [
      [{}, ['keys is required']],
      [{ keys: [{ ...entry, sha256: 'abc' }] }, ['keys[0].sha256 must be the SHA-256 of the key in hex (64 digits)']],
      [{ keys: [{ ...entry, role: 'owner' }] }, ['keys[0].role must be one of [reader, writer, admin]']],
      [{ keys: [{ ...entry, instances: [] }] }, ['keys[0].instances must contain at least 1 items']],
      [{ keys: [{ ...entry, instances: ['a b'] }] }, ['keys[0].instances[0] must be an instance ID or "*"']],
      [{ keys: [{ ...entry, name: 'has space' }] }, ['keys[0].name must be 1-128 letters, digits and - _ . @ :, starting with a letter or digit']],
      [{ keys: [{ ...entry, key: 'the key itself' }] }, ['keys[0].key is not allowed']],
      [{ keys: [entry, { ...entry, sha256: 'b'.repeat(64) }] }, ['keys[1] repeats a name or a key of an earlier entry']],
      [{ keys: [entry, { ...entry, name: 'b', sha256: DIGEST.toUpperCase() }] }, ['keys[1] repeats a name or a key of an earlier entry']],
      [{ keys: [{ name: 'a' }] }, ['keys[0].sha256 is required', 'keys[0].role is required', 'keys[0].instances is required']],
    ];
    for (const [file, expected] of cases) {
      expect(problemsOf(() => parseApiKeysFile(JSON.stringify(file))), JSON.stringify(file)).to.deep.equal(expected);
    }
    expect(problemsOf(() => parseApiKeysFile('{"keys": ['))[0]).to.match(/^not valid JSON: /);
  });
});

describe('the OIDC grants file', () => {
  it('reads grants to subjects and to emails (compared in lower case)', () => {
    const grants = parseGrantsFile(
      JSON.stringify({
        grants: [
          { subject: 'system:serviceaccount:shop:orders', role: 'writer', instances: ['*'] },
          { email: 'Reports@Example.iam.gserviceaccount.com', role: 'reader', instances: ['inst-a'] },
        ],
      }),
    );
    expect(grants).to.deep.equal([
      { subject: 'system:serviceaccount:shop:orders', grant: { role: 'writer', instances: ['*'] } },
      { email: 'reports@example.iam.gserviceaccount.com', grant: { role: 'reader', instances: ['inst-a'] } },
    ]);
  });

  it('needs exactly one of subject and email', () => {
    const both = { grants: [{ subject: 's', email: 'a@b', role: 'reader', instances: ['*'] }] };
    expect(problemsOf(() => parseGrantsFile(JSON.stringify(both)))).to.deep.equal(['grants[0] must have subject or email, not both']);
    const neither = { grants: [{ role: 'reader', instances: ['*'] }] };
    expect(problemsOf(() => parseGrantsFile(JSON.stringify(neither)))).to.deep.equal(["grants[0] must have subject (matched to the token's sub) or email"]);
  });
});

describe('unservedInstances', () => {
  it('lists the instances grants name that are not served, ignoring *', () => {
    const grants = [
      { role: 'reader' as const, instances: ['inst-a', '*', 'inst-z'] },
      { role: 'admin' as const, instances: ['inst-y', 'inst-z'] },
    ];
    expect(unservedInstances(grants, ['inst-a'])).to.deep.equal(['inst-y', 'inst-z']);
  });
});

describe('findApiKeyHolder', () => {
  const keys = Array.from({ length: 50 }, (_, i) => ({ name: `svc-${i}`, key: newApiKey() }));
  const entries = parseApiKeysFile(
    JSON.stringify({ keys: keys.map(({ name, key }) => ({ name, sha256: sha256Hex(key), role: 'reader', instances: ['*'] })) }),
  );

  it('finds the holder of a key wherever it is in the list', () => {
    for (const index of [0, 25, 49]) {
      expect(findApiKeyHolder(entries, keys[index]?.key ?? '')?.name).to.equal(`apikey:svc-${index}`);
    }
  });

  it('finds nobody for an unknown key, a key one character off, or the digest itself', () => {
    const key = keys[3]?.key ?? '';
    for (const attempt of [newApiKey(), `${key}x`, key.slice(0, -1), sha256Hex(key), '']) {
      expect(findApiKeyHolder(entries, attempt)).to.equal(undefined);
    }
  });
});
