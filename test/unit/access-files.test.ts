import { expect } from 'chai';
import { type Caller, type Role, type ServedStores, callerMay, callerRole, usableStores } from '../../src/auth/access.ts';
import { AccessFileError, parseApiKeysFile, parseGrantsFile, unservedScopes } from '../../src/auth/access-files.ts';
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
      [{ keys: [{ ...entry, instances: ['a b'] }] }, ['keys[0].instances[0] must be an instance ID, "store/instance", "store/*" or "*"']],
      [
        { keys: [{ ...entry, instances: ['Main/inst-a', '*/inst-a', 'main/', '/inst-a', 'a/b/c', 'main/**'] }] },
        [0, 1, 2, 3, 4, 5].map((index) => `keys[0].instances[${index}] must be an instance ID, "store/instance", "store/*" or "*"`),
      ],
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

describe('grant scopes', () => {
  it('accepts an instance of the default store, one of a named store, every instance of a store, and everything', () => {
    const scopes = ['inst-a', 'main/inst-a', 'cache/*', 'a-1/x_y.z', '*'];
    const [key] = parseApiKeysFile(JSON.stringify({ keys: [{ name: 'a', sha256: DIGEST, role: 'reader', instances: scopes }] }));
    expect(key?.grant.instances).to.deep.equal(scopes);
    const [grant] = parseGrantsFile(JSON.stringify({ grants: [{ subject: 's', role: 'reader', instances: scopes }] }));
    expect(grant?.grant.instances).to.deep.equal(scopes);
  });
});

describe('unservedScopes', () => {
  const served: ServedStores = {
    default: { name: 'main' },
    all: [
      { name: 'main', instances: ['inst-a'] },
      { name: 'cache', instances: ['sessions'] },
    ],
  };

  it('lists the scopes naming a store or an instance that is not served, ignoring * and reading bare names as the default store', () => {
    const grants = [
      { role: 'reader' as const, instances: ['inst-a', '*', 'inst-z', 'main/inst-a', 'cache/sessions', 'cache/*'] },
      { role: 'admin' as const, instances: ['inst-y', 'inst-z', 'cache/inst-a', 'other/*', 'other/x', 'sessions'] },
    ];
    expect(unservedScopes(grants, served)).to.deep.equal(['cache/inst-a', 'inst-y', 'inst-z', 'other/*', 'other/x', 'sessions']);
  });
});

/**
 * Who may do what, from a real keys file to the decision, for every scope form, role and target.
 * The expected coverage of each scope is written out, not computed: the test must not share the
 * code's mistakes.
 */
describe('the authorization matrix at the function level', () => {
  const served: ServedStores = {
    default: { name: 'main' },
    all: [
      { name: 'main', instances: ['inst-a', 'inst-b'] },
      { name: 'cache', instances: ['inst-a', 'sessions'] },
    ],
  };
  const TARGETS = ['main/inst-a', 'main/inst-b', 'main/unknown', 'cache/inst-a', 'cache/sessions', 'cache/unknown', 'other/inst-a'] as const;
  const COVERS: Record<string, ReadonlyArray<(typeof TARGETS)[number]>> = {
    'inst-a': ['main/inst-a'],
    'main/inst-a': ['main/inst-a'],
    'main/*': ['main/inst-a', 'main/inst-b', 'main/unknown'],
    'cache/inst-a': ['cache/inst-a'],
    'cache/*': ['cache/inst-a', 'cache/sessions', 'cache/unknown'],
    '*': [...TARGETS],
    'other/*': ['other/inst-a'],
    sessions: [],
  };
  const RANK: Record<Role, number> = { reader: 0, writer: 1, admin: 2 };
  const ROLES: readonly Role[] = ['reader', 'writer', 'admin'];

  function holder(role: Role, scopes: readonly string[]): Caller {
    const key = `key-${role}-${scopes.join()}`;
    const entries = parseApiKeysFile(JSON.stringify({ keys: [{ name: 'k', sha256: sha256Hex(key), role, instances: scopes }] }));
    const caller = findApiKeyHolder(entries, key);
    if (caller === undefined) throw new Error('the key was not found');
    return caller;
  }

  for (const [scope, covered] of Object.entries(COVERS)) {
    it(`a grant on "${scope}" gives its role, and the roles below it, exactly where it covers`, () => {
      for (const held of ROLES) {
        const caller = holder(held, [scope]);
        for (const target of TARGETS) {
          const [store = '', instance = ''] = target.split('/');
          const covers = covered.includes(target);
          expect(callerRole(caller, { store, instance }, 'main'), `${held} ${scope} on ${target}`).to.equal(covers ? held : undefined);
          for (const needed of ROLES) {
            const allowed = covers && RANK[held] >= RANK[needed];
            expect(callerMay(caller, needed, { store, instance }, 'main'), `${held} ${scope} doing ${needed} on ${target}`).to.equal(allowed);
          }
        }
      }
    });
  }

  it('takes the highest role of several grants, from both a key and tokens', () => {
    const caller: Caller = {
      name: 'oidc:s',
      grants: parseGrantsFile(
        JSON.stringify({
          grants: [
            { subject: 's', role: 'reader', instances: ['*'] },
            { subject: 's', role: 'admin', instances: ['cache/sessions'] },
            { subject: 's', role: 'writer', instances: ['inst-b'] },
          ],
        }),
      ).map((entry) => entry.grant),
    };
    expect(callerRole(caller, { store: 'cache', instance: 'sessions' }, 'main')).to.equal('admin');
    expect(callerRole(caller, { store: 'main', instance: 'inst-b' }, 'main')).to.equal('writer');
    expect(callerRole(caller, { store: 'main', instance: 'inst-a' }, 'main')).to.equal('reader');
    expect(callerMay(caller, 'writer', { store: 'cache', instance: 'inst-a' }, 'main')).to.equal(false);
  });

  it('lists the stores and served instances a caller may use, in configuration order, with its role on each', () => {
    expect(usableStores(holder('writer', ['inst-b', 'cache/*', 'other/*', 'main/unknown']), served)).to.deep.equal([
      { name: 'main', instances: [{ name: 'inst-b', role: 'writer' }] },
      {
        name: 'cache',
        instances: [
          { name: 'inst-a', role: 'writer' },
          { name: 'sessions', role: 'writer' },
        ],
      },
    ]);
    expect(usableStores(holder('reader', ['*']), served).map((store) => store.name)).to.deep.equal(['main', 'cache']);
    expect(usableStores(holder('admin', ['cache/unknown', 'sessions']), served)).to.deep.equal([]);
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
