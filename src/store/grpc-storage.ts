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
