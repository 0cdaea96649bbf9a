import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { FeedObserver } from '../service/change-feeds.ts';

/**
 * Seconds. prom-client's default buckets start at 5 ms; a Bigtable read near its data answers in
 * about a millisecond, so two finer buckets come first.
 */
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** The route label of a request no route matched, so arbitrary paths never become label values. */
export const UNMATCHED_ROUTE = '(unmatched)';

/**
 * Metrics is the Prometheus metric set of one app: created per app (not in prom-client's global
 * registry), so several apps in one process (the tests) never share or clash.
 */
export interface Metrics {
  /** Everything to expose: this app's metrics and the process-wide ones. */
  readonly registry: Registry;
  /**
   * From the first byte of the request to the last of the response, by route template, and by the
   * store's name for requests known to be served by one (the others have no store label).
   */
  readonly httpRequestDuration: Histogram<'method' | 'route' | 'status_code' | 'store'>;
  readonly httpRequestsInFlight: Gauge;
  /** Requests refused to keep the service available, by the bound that refused them (`limit`). */
  readonly httpRequestsShed: Counter<'limit'>;
  /** When each access file (by its variable) was last read and found valid, in seconds since the epoch. */
  readonly accessFileLastSuccess: Gauge<'file'>;
  /** Reads of an access file that found it unreadable or invalid (the last valid content stayed in force). */
  readonly accessFileFailures: Counter<'file' | 'reason'>;
  /** Each DataStore call, by store type, operation and outcome (StoreError code or OK). */
  readonly storeOperationDuration: Histogram<'store' | 'operation' | 'code'>;
  /**
   * Calls a driver sent for single-row operations coalesced in one turn, by store, and operation
   * (mutateRow, readRows): how many callers each call served (1 for a call made alone).
   */
  readonly storeBatchSize: Histogram<'store' | 'operation'>;
  /** Change feeds open now, by store. */
  readonly feedsOpen: Gauge<'store'>;
  /** Changes delivered to feeds' readers, by store. */
  readonly feedChangesDelivered: Counter<'store'>;
  /** From a change's commit to its delivery, by store. */
  readonly feedLag: Histogram<'store'>;
  /** Feeds ended, by store and why (CLIENT_GONE: the reader left). */
  readonly feedsEnded: Counter<'store' | 'reason'>;
}

export function createMetrics(): Metrics {
  const own = new Registry();
  const httpRequestDuration = new Histogram({
    name: 'kvcrud_http_request_duration_seconds',
    help: 'HTTP requests by method, route template, status code and, once known, store: time from request to the end of the response.',
    labelNames: ['method', 'route', 'status_code', 'store'] as const,
    buckets: DURATION_BUCKETS,
    registers: [own],
  });
  const httpRequestsInFlight = new Gauge({
    name: 'kvcrud_http_requests_in_flight',
    help: 'HTTP requests received and not yet answered.',
    registers: [own],
  });
  const httpRequestsShed = new Counter({
    name: 'kvcrud_http_requests_shed_total',
    help:
      'HTTP requests refused to keep the service available, by the bound that refused them: inflight (MAX_INFLIGHT), ' +
      'inflight_per_caller (MAX_INFLIGHT_PER_CALLER), credential_checks (MAX_INFLIGHT_UNAUTHENTICATED), ' +
      'body_rate (MIN_BODY_BYTES_PER_SECOND), body_bytes (large bodies in flight, sized from the heap), ' +
      'answer_bytes (rows held for answers, sized from the heap: a batchGet that waited too long for its turn), rate_limit (RATE_LIMIT_PER_SECOND), ' +
      'feeds (FEEDS_MAX), feeds_per_caller (FEEDS_MAX_PER_CALLER).',
    labelNames: ['limit'] as const,
    registers: [own],
  });
  const accessFileLastSuccess = new Gauge({
    name: 'kvcrud_access_file_last_success_timestamp_seconds',
    help: 'When the keys or grants file (by its variable) was last read and found valid, so that its content is the one in force.',
    labelNames: ['file'] as const,
    registers: [own],
  });
  const accessFileFailures = new Counter({
    name: 'kvcrud_access_file_failures_total',
    help: 'Reads of the keys or grants file that found it unreadable or invalid; the last valid content stayed in force.',
    labelNames: ['file', 'reason'] as const,
    registers: [own],
  });
  const storeOperationDuration = new Histogram({
    name: 'kvcrud_store_operation_duration_seconds',
    help: 'Data store operations by store type, operation and outcome code (OK or the StoreError code), retries included.',
    labelNames: ['store', 'operation', 'code'] as const,
    buckets: DURATION_BUCKETS,
    registers: [own],
  });
  const storeBatchSize = new Histogram({
    name: 'kvcrud_store_batch_size',
    help: 'Callers served by each backend call a store driver sent for coalesced single-row operations, by store and operation (1: a call made alone).',
    labelNames: ['store', 'operation'] as const,
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000],
    registers: [own],
  });
  const feedsOpen = new Gauge({ name: 'kvcrud_feeds_open', help: 'Change feeds open now, by store.', labelNames: ['store'] as const, registers: [own] });
  const feedChangesDelivered = new Counter({
    name: 'kvcrud_feed_changes_delivered_total',
    help: "Changes delivered to change feeds' readers, by store.",
    labelNames: ['store'] as const,
    registers: [own],
  });
  const feedLag = new Histogram({
    name: 'kvcrud_feed_lag_seconds',
    help: "From a change's commit in the store to its delivery to a feed's reader, by store.",
    labelNames: ['store'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [own],
  });
  const feedsEnded = new Counter({
    name: 'kvcrud_feeds_ended_total',
    help: 'Change feeds ended, by store and reason (CLIENT_GONE: the reader left; TABLE_DELETED, SHUTTING_DOWN, CREDENTIAL_EXPIRED, SLOW_READER, BACKEND_UNAVAILABLE).',
    labelNames: ['store', 'reason'] as const,
    registers: [own],
  });
  return {
    registry: Registry.merge([own, processRegistry()]),
    feedsOpen,
    feedChangesDelivered,
    feedLag,
    feedsEnded,
    httpRequestDuration,
    httpRequestsInFlight,
    httpRequestsShed,
    accessFileLastSuccess,
    accessFileFailures,
    storeOperationDuration,
    storeBatchSize,
  };
}

let processMetrics: Registry | undefined;

/**
 * The default process metrics (CPU, memory, heap, event-loop lag, GC): one set per process, since
 * prom-client's collectors (a GC observer, an event-loop delay monitor) are per process and
 * cannot be stopped.
 */
function processRegistry(): Registry {
  if (processMetrics === undefined) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  return processMetrics;
}

/** accessFileChecks records what each read of an access file found (see ReloadingFile's onCheck). */
export function accessFileChecks(metrics: Pick<Metrics, 'accessFileLastSuccess' | 'accessFileFailures'>): (file: string, outcome: 'valid' | 'unreadable' | 'invalid') => void {
  return (file, outcome) => {
    if (outcome === 'valid') metrics.accessFileLastSuccess.set({ file }, Date.now() / 1000);
    else metrics.accessFileFailures.inc({ file, reason: outcome });
  };
}

/** feedMetrics records what the change feeds report: open feeds, changes delivered and their lag, feeds ended. */
export function feedMetrics(metrics: Pick<Metrics, 'feedsOpen' | 'feedChangesDelivered' | 'feedLag' | 'feedsEnded'>): FeedObserver {
  return {
    opened: (store) => metrics.feedsOpen.inc({ store }),
    closed: (store, reason) => {
      metrics.feedsOpen.dec({ store });
      metrics.feedsEnded.inc({ store, reason });
    },
    delivered: (store, change) => {
      metrics.feedChangesDelivered.inc({ store });
      metrics.feedLag.observe({ store }, Math.max(0, Date.now() / 1000 - Number(change.commitMicros) / 1e6));
    },
  };
}
