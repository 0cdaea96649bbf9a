import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import type { Authenticator, CheckGate, Credential } from '../../auth/authenticator.ts';
import { AuthenticationError, type ChallengeError } from '../../auth/errors.ts';
import { ApiError } from '../../service/errors.ts';
import type { AppState } from '../app-state.ts';
import type { InflightLimits } from '../admission/inflight-limits.ts';

/** The realm of the WWW-Authenticate challenge. */
export const REALM = 'kvcrud';
/**
 * Longest credential accepted, in characters: a JWT with many claims fits, and so does the rest
 * of a request's headers within Node's limit (SERVER_LIMITS.maxHeaderSize, 64 KiB).
 */
export const MAX_CREDENTIAL_CHARS = 16 * 1024;
// RFC 6750's b64token is narrower; any visible ASCII lets operators choose their key format.
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;
const BEARER = /^Bearer +(.*)$/i;

export interface AuthenticateOptions {
  /**
   * Bounds the credential checks that cost real work (a token's signature, checked the first time
   * the token is seen), in total and per client address, so that a flood of forged tokens cannot
   * take the service's CPU from the callers it knows. Past a bound: 503 OVERLOADED.
   */
  readonly checks?: InflightLimits;
}

/**
 * authenticate establishes who makes the request, before anything else about it is looked at:
 * an unauthenticated caller learns nothing, not even whether an instance exists. It sets
 * ctx.state.caller and ctx.state.principal, or answers 401 UNAUTHENTICATED with a
 * `WWW-Authenticate: Bearer` challenge (RFC 6750) and logs why (never the credential).
 */
export function authenticate(authenticator: Authenticator, logger: Logger, options: AuthenticateOptions = {}): Middleware<AppState> {
  const { checks } = options;
  return async (ctx, next) => {
    try {
      // With AUTH_MODE none nothing is read: headers that were ignored before stay ignored.
      const credential = authenticator.modes.length === 0 ? undefined : credentialOf(ctx);
      const caller = await authenticator.authenticate(credential, checks === undefined ? {} : { gate: checkGate(ctx, checks) });
      ctx.state.caller = caller;
      ctx.state.principal = caller.name;
    } catch (error) {
      if (error instanceof AuthenticationError) {
        ctx.set('WWW-Authenticate', bearerChallenge(error.challenge));
        logger.info(
          { requestId: ctx.state.requestId, method: ctx.method, path: ctx.path, reason: error.reason },
          'request not authenticated',
        );
      }
      throw error;
    }
    await next();
  };
}

/** Runs an expensive credential check within the bounds of `checks`, counted against the client's address. */
function checkGate(ctx: Context & { state: AppState }, checks: InflightLimits): CheckGate {
  return async (check) => {
    const key = ctx.ip;
    if (checks.acquire(key) !== undefined) {
      ctx.state.shedBy = 'credential_checks';
      throw new ApiError('OVERLOADED', 'The service is checking as many new credentials as it takes. Retry shortly.');
    }
    try {
      return await check();
    } finally {
      checks.release(key);
    }
  };
}

/**
 * The credential of a request: `Authorization: Bearer <credential>` or `X-API-Key: <key>`, one
 * header, once. Node keeps the first of repeated Authorization headers and joins repeated
 * X-API-Key ones, while a proxy in front may have read another; so a repeated header is refused
 * rather than one of them chosen.
 */
function credentialOf(ctx: Context): Credential | undefined {
  for (const [header, name] of [['authorization', 'Authorization'], ['x-api-key', 'X-API-Key']] as const) {
    if ((ctx.req.headersDistinct[header]?.length ?? 0) > 1) {
      throw malformed(`Send one ${name} header, not several.`, `repeated ${name}`);
    }
  }
  const authorization = ctx.get('Authorization');
  const apiKey = ctx.get('X-API-Key');
  if (authorization !== '' && apiKey !== '') {
    throw malformed('Send one credential: Authorization or X-API-Key, not both.', 'both Authorization and X-API-Key');
  }
  if (apiKey !== '') {
    checkLength(apiKey, 'X-API-Key');
    if (!VISIBLE_ASCII.test(apiKey)) throw malformed('The X-API-Key header must hold just the key.', 'malformed X-API-Key');
    return { via: 'apiKey', value: apiKey };
  }
  if (authorization !== '') {
    const token = BEARER.exec(authorization)?.[1];
    if (token !== undefined) checkLength(token, 'Authorization');
    if (token === undefined || !VISIBLE_ASCII.test(token)) {
      throw malformed('The Authorization header must be `Bearer <credential>`.', 'malformed Authorization');
    }
    return { via: 'bearer', value: token };
  }
  return undefined;
}

function checkLength(credential: string, header: string): void {
  if (credential.length > MAX_CREDENTIAL_CHARS) {
    throw malformed(`The credential is longer than ${MAX_CREDENTIAL_CHARS} characters.`, `${header} credential too long`);
  }
}

function malformed(detail: string, reason: string): AuthenticationError {
  return new AuthenticationError(detail, { challenge: 'invalid_request', reason });
}

function bearerChallenge(error: ChallengeError | undefined): string {
  return error === undefined ? `Bearer realm="${REALM}"` : `Bearer realm="${REALM}", error="${error}"`;
}
