import { ApiError } from '../service/errors.ts';

/**
 * The `error` of RFC 6750's WWW-Authenticate challenge: `invalid_request` for a credential sent
 * the wrong way, `invalid_token` for one that was not accepted, none when there was no credential.
 */
export type ChallengeError = 'invalid_request' | 'invalid_token';

/**
 * AuthenticationError is a 401 UNAUTHENTICATED. `detail` tells an honest caller what to fix
 * without saying which check a forged credential failed; `reason` is the precise cause, for the
 * logs only. Neither ever contains the credential.
 */
export class AuthenticationError extends ApiError {
  readonly challenge: ChallengeError | undefined;
  readonly reason: string;

  constructor(detail: string, options: { challenge?: ChallengeError; reason: string; cause?: unknown }) {
    super('UNAUTHENTICATED', detail, {}, options.cause);
    this.name = 'AuthenticationError';
    this.challenge = options.challenge;
    this.reason = options.reason;
  }
}

/** Detail for any credential that was not accepted, whatever the check it failed. */
export const NOT_ACCEPTED = 'The credential was not accepted.';
