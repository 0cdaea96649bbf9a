/**
 * isOutOfStorage says whether a gRPC RESOURCE_EXHAUSTED answer (Bigtable, Spanner) means the
 * backend is out of storage, rather than throttling. Both backends give that one status to
 * request quotas, rate limits, too many sessions and a server short of memory for the moment as
 * well: those pass with time and are retried (UNAVAILABLE). Storage that is full (a Bigtable
 * cluster past its storage per node, a Spanner instance past its storage limit) passes only when
 * an operator adds capacity. Only the message tells them apart: one naming storage or disk space
 * is out of storage; any other RESOURCE_EXHAUSTED, whatever it says, is throttling.
 */
export function isOutOfStorage(message: string): boolean {
  return /\b(storage|disk space|out of space|no space)\b/i.test(message);
}

/**
 * isCredentialFailure says whether a gRPC call failed because its credentials could not give a
 * token (a metadata server that answers 500, a key file that is not one): grpc-js reports that
 * with status UNKNOWN, as "Getting metadata from plugin failed with error: …". The call never
 * reached the backend, and it may pass once the credentials can be had again: it is UNAVAILABLE,
 * not a bug.
 */
export function isCredentialFailure(message: string): boolean {
  return message.includes('Getting metadata from plugin failed');
}
