/**
 * The files that say who may do what: AUTH_API_KEYS_FILE (API keys, by SHA-256) and
 * AUTH_OIDC_GRANTS_FILE (token subjects or emails). Both are parsed strictly: a typo must not
 * silently grant or withhold access, so anything unexpected makes the whole file invalid.
 */
import Joi from 'joi';
import { ALL_INSTANCES, type Grant, ROLES, type ServedStores, parseScope } from './access.ts';

/** AccessFileError lists every problem of a file, each naming its place (`keys[1].sha256`). */
export class AccessFileError extends Error {
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(problems.join('; '));
    this.name = 'AccessFileError';
    this.problems = problems;
  }
}

/** An API key: who holds it, the SHA-256 of the key (never the key), and what it may do. */
export interface ApiKeyEntry {
  readonly name: string;
  readonly sha256: Buffer;
  readonly grant: Grant;
}

/** A grant to the holders of tokens with this subject (`sub`) or this verified email. */
export type SubjectGrant = { readonly subject: string; readonly grant: Grant } | { readonly email: string; readonly grant: Grant };

// An instance as the stores name them (and a little more, so a grant may name one served
// elsewhere), after an optional store name as STORES_FILE allows it (1-32 of [a-z0-9-]).
const INSTANCE = '[A-Za-z0-9][-_.A-Za-z0-9]{0,62}';
const SCOPE = new RegExp(`^(?:\\*|${INSTANCE}|[a-z0-9-]{1,32}/(?:\\*|${INSTANCE}))$`);

const grantFields = {
  role: Joi.string()
    .valid(...ROLES)
    .required(),
  instances: Joi.array()
    .items(
      Joi.string()
        .pattern(SCOPE)
        .messages({ 'string.pattern.base': `{{#label}} must be an instance ID, "store/instance", "store/*" or "${ALL_INSTANCES}"` }),
    )
    .min(1)
    .unique()
    .required(),
};

const apiKeysFile = Joi.object({
  keys: Joi.array()
    .items(
      Joi.object({
        // Names end up in logs and traces: keep them plain.
        name: Joi.string()
          .pattern(/^[A-Za-z0-9][-_.@:A-Za-z0-9]{0,127}$/)
          .required()
          .messages({ 'string.pattern.base': '{{#label}} must be 1-128 letters, digits and - _ . @ :, starting with a letter or digit' }),
        sha256: Joi.string()
          .pattern(/^[0-9a-fA-F]{64}$/)
          .required()
          .messages({ 'string.pattern.base': '{{#label}} must be the SHA-256 of the key in hex (64 digits)' }),
        ...grantFields,
      }),
    )
    .unique('name')
    .unique((a: { sha256: string }, b: { sha256: string }) => a.sha256.toLowerCase() === b.sha256.toLowerCase())
    .messages({ 'array.unique': '{{#label}} repeats a name or a key of an earlier entry' })
    .required(),
});

const grantsFile = Joi.object({
  grants: Joi.array()
    .items(
      Joi.object({
        subject: Joi.string().min(1).max(1024),
        email: Joi.string().min(3).max(320).pattern(/^[^@\s]+@[^@\s]+$/),
        ...grantFields,
      })
        .xor('subject', 'email')
        .messages({
          'object.xor': '{{#label}} must have subject or email, not both',
          'object.missing': '{{#label}} must have subject (matched to the token\'s sub) or email',
        }),
    )
    .required(),
});

const OPTIONS: Joi.ValidationOptions = { abortEarly: false, convert: false, errors: { wrap: { label: false } } };

function parse(text: string, schema: Joi.ObjectSchema): unknown {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new AccessFileError([`not valid JSON: ${(error as Error).message}`]);
  }
  const result = schema.validate(json, OPTIONS);
  if (result.error) throw new AccessFileError(result.error.details.map((detail) => detail.message));
  return result.value;
}

/** parseApiKeysFile reads `{"keys":[{"name","sha256","role","instances"}]}`, or throws AccessFileError. */
export function parseApiKeysFile(text: string): ApiKeyEntry[] {
  const { keys } = parse(text, apiKeysFile) as { keys: Array<{ name: string; sha256: string } & Grant> };
  return keys.map((key) => ({
    name: key.name,
    sha256: Buffer.from(key.sha256, 'hex'),
    grant: { role: key.role, instances: key.instances },
  }));
}

/** parseGrantsFile reads `{"grants":[{"subject" or "email","role","instances"}]}`, or throws AccessFileError. */
export function parseGrantsFile(text: string): SubjectGrant[] {
  const { grants } = parse(text, grantsFile) as { grants: Array<{ subject?: string; email?: string } & Grant> };
  return grants.map(({ subject, email, role, instances }) =>
    subject === undefined ? { email: (email ?? '').toLowerCase(), grant: { role, instances } } : { subject, grant: { role, instances } },
  );
}

/**
 * The scopes of `grants` that name a store the service does not serve, or an instance its store
 * does not serve: allowed (files may be shared), worth a warning. Bare instance names are the
 * default store's.
 */
export function unservedScopes(grants: readonly Grant[], served: ServedStores): string[] {
  const named = new Set(grants.flatMap((grant) => grant.instances));
  named.delete(ALL_INSTANCES);
  return [...named]
    .filter((scope) => {
      const { store, instance } = parseScope(scope);
      const instances = served.all.find((candidate) => candidate.name === (store ?? served.default.name))?.instances;
      return instances === undefined || (instance !== ALL_INSTANCES && !instances.includes(instance));
    })
    .sort();
}
