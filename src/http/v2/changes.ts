import { isUtf8 } from 'node:buffer';
import type { FeedQuery } from '../../service/change-feeds.ts';
import type { ErrorCode } from '../../service/errors.ts';
import { prefixRange } from '../../service/key-ranges.ts';
import type { TableTarget } from '../../service/tables.ts';
import { formatTimestamp, parseTimestamp } from '../../service/timestamps.ts';
import type { Change, KeyRange, Mutation } from '../../store/store.ts';
import { EventStreamAnswer } from './event-stream.ts';
import { LongPollAnswer, MOST_CHANGES } from './long-poll.ts';
import { type Operation, defineOperation } from '../operations/operation.ts';
import { columnSelector, inBase64, renderKey, urlBytes } from './bytes.ts';
import { type ChangesQuery, type TablePath, changesQuery, changesResponse, tablePath } from './schemas.ts';

/**
 * The change feed of a table: Server-Sent Events for `Accept: text/event-stream`, a long poll
 * answering JSON otherwise. Both start where the cursor (or `Last-Event-ID`, or `since`) says, or
 * from now, and hold nothing of the caller's in the service: the cursor is the position.
 */

const ERRORS: readonly ErrorCode[] = [
  'STORE_NOT_FOUND',
  'INSTANCE_NOT_FOUND',
  'BACKEND_UNAVAILABLE',
  'DEADLINE_EXCEEDED',
  'TABLE_NOT_FOUND',
  'INVALID_CURSOR',
  'CURSOR_EXPIRED',
  'NOT_SUPPORTED_BY_STORE',
];

export const CHANGES_OPERATION: Operation = defineOperation<TablePath, ChangesQuery>({
  operationId: 'tables.changes',
  tag: 'v2',
  role: 'reader',
  method: 'get',
  path: '/v2/stores/{store}/instances/{instance}/tables/{table}/changes',
  pathParameters: ['store', 'instance', 'table'],
  params: tablePath,
  query: changesQuery,
  summary: 'Follow the changes of a table',
  description:
    'Every change committed to the table after the start, in commit order per key: one per row write, batch entry, applied conditional ' +
    'mutation and readModifyWrite, in the `:mutate` shape. With `Accept: text/event-stream`, Server-Sent Events: `id:` is the cursor after ' +
    'the event, `event: change`, `data:` one change; a comment heartbeat with the newest `id:` at least every 10 s; `event: end` with ' +
    '`{reason, cursor}` when the service ends the feed (TABLE_DELETED, SHUTTING_DOWN, CREDENTIAL_EXPIRED, SLOW_READER, BACKEND_UNAVAILABLE). ' +
    'Resume with `Last-Event-ID` or `?cursor=`: nothing missed, nothing before it again, on any replica. Otherwise a long poll: ' +
    `\`{changes, cursor}\` as soon as there is a change, or empty after \`wait\` seconds: at most ${MOST_CHANGES} changes, ending before the change that ` +
    "would take their keys, columns and values past the store's `pageBytes` (at least one change); `cursor` is after the last change " +
    'in the answer, so the next poll starts with the rest. No cursor and no `since`: from now. ' +
    "A cursor older than the store's `changeRetentionSeconds` is 410 CURSOR_EXPIRED. Needs the store capability `changeFeed`.",
  success: {
    status: 200,
    description: 'The feed: the changes after the start (JSON), or the stream of them (text/event-stream).',
    schema: changesResponse,
    example: () => ({
      changes: [
        {
          key: 'order#1001',
          timestamp: '2026-11-21T04:27:00.123000Z',
          mutations: [{ set: { family: 'cf', column: 'status', value: 'shipped', timestamp: '2026-11-21T04:27:00.123000Z' } }],
        },
      ],
      cursor: 'AWUxLjQyZ6lG4xq2VbXZ1Yt7',
    }),
    eventStream:
      'Server-Sent Events: `id: <cursor>`, `event: change`, `data: <change as in the JSON answer>`; `: heartbeat` comments; a last `event: end` with `{reason, cursor}`.',
  },
  errors: ERRORS,
  // A long poll's changes are held until its answer is written; an event stream holds none.
  holdsRows: true,
  handle: async ({ params, query }, { services, signal, header, caller, callerKey, answer }) => {
    const base64 = inBase64(query);
    const target: TableTarget = { store: params.store, instance: params.instance, table: params.table };
    const lastEventId = header('last-event-id');
    const cursor = lastEventId !== '' ? { value: lastEventId, field: 'Last-Event-ID' } : query.cursor === undefined ? undefined : { value: query.cursor, field: 'cursor' };
    const bound = (text: string | undefined) => (text === undefined || text === '' ? undefined : urlBytes(text, base64));
    const prefix = bound(query.prefix);
    const range: KeyRange = prefix !== undefined ? prefixRange(prefix) : { ...optional('start', bound(query.start)), ...optional('end', bound(query.end)) };
    const feedQuery: FeedQuery = {
      cursor,
      sinceMicros: cursor === undefined && query.since !== undefined ? parseTimestamp(query.since) : undefined,
      range,
      columns: query.columns?.map((column) => columnSelector(column, base64, true)),
    };
    const feed = await services.feeds.open(target, feedQuery, callerKey, signal);
    const render = (change: Change) => renderChange(change, base64);
    if (prefersEventStream(header('accept'))) {
      return new EventStreamAnswer(feed, { render: (event) => JSON.stringify(render(event.change)), expiresAtMs: caller?.expiresAtMs });
    }
    return new LongPollAnswer(feed, { waitSeconds: query.wait ?? 0, render: (event) => render(event.change), answer });
  },
});

/** Whether the request asks for Server-Sent Events rather than JSON. */
function prefersEventStream(accept: string): boolean {
  return /(^|,)\s*text\/event-stream\s*(;|,|$)/i.test(accept) && !/(^|,)\s*application\/json\s*(;|,|$)/i.test(accept);
}

/** A change as the API shows it: the key, the commit time, the mutations in the `:mutate` shape. */
export function renderChange(change: Change, base64: boolean) {
  return { ...renderKey(change.key, base64), timestamp: formatTimestamp(change.commitMicros), mutations: change.mutations.map((mutation) => renderMutation(mutation, base64)) };
}

function renderMutation(mutation: Mutation, base64: boolean) {
  switch (mutation.type) {
    case 'set': {
      const text = !base64 && isUtf8(mutation.column) && isUtf8(mutation.value);
      const encoding = text || base64 ? 'utf8' : 'base64';
      const as = text ? 'utf8' : 'base64';
      return {
        set: {
          family: mutation.family,
          column: mutation.column.toString(as),
          value: mutation.value.toString(as),
          timestamp: formatTimestamp(mutation.timestampMicros),
          ...(encoding === 'base64' ? { encoding: 'base64' as const } : {}),
        },
      };
    }
    case 'deleteColumn': {
      const text = !base64 && isUtf8(mutation.column);
      return { deleteColumn: { family: mutation.family, column: mutation.column.toString(text ? 'utf8' : 'base64'), ...(text || base64 ? {} : { encoding: 'base64' as const }) } };
    }
    case 'deleteFamily':
      return { deleteFamily: { family: mutation.family } };
    case 'deleteRow':
      return { deleteRow: {} };
  }
}

function optional<K extends string>(name: K, value: Buffer | undefined): Partial<Record<K, Buffer>> {
  return value === undefined ? {} : ({ [name]: value } as Record<K, Buffer>);
}
