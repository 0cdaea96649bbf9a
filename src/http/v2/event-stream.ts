import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import type { FeedEnd, FeedEvent, OpenFeed } from '../../service/change-feeds.ts';
import { StreamedAnswer } from '../operations/streamed-answer.ts';

/** Most milliseconds between two writes of an idle stream: a heartbeat comes at least this often. */
export const HEARTBEAT_MS = 10_000;
/** The events a reader has not taken yet that a stream holds; past it the feed waits for the reader. */
const BUFFER_BYTES = 64 * 1024;
/** How long a reader may leave a full buffer untaken before its feed is closed. */
export const SLOW_READER_MS = 10_000;

export interface EventStreamOptions {
  /** Renders a change event's `data`, one line of JSON. */
  readonly render: (event: Extract<FeedEvent, { type: 'change' }>) => string;
  /** When the caller's credential stops being valid, in milliseconds since the epoch. */
  readonly expiresAtMs?: number | undefined;
  readonly heartbeatMs?: number;
  readonly slowReaderMs?: number;
}

/**
 * A change feed as Server-Sent Events: `id:` is the cursor after each event, `event: change` with
 * `data:` one change. A comment heartbeat, with the newest cursor as its `id:`, comes when nothing
 * was written for HEARTBEAT_MS. When the service ends the feed (the table deleted, shutdown, the
 * credential expired, a reader too slow, the store failing), an `event: end` with `data:
 * {"reason", "cursor"}` comes last. The stream holds at most BUFFER_BYTES for its reader: beyond
 * that the feed waits, and a reader that takes nothing for SLOW_READER_MS is cut off, its cursor
 * in the end event.
 */
export class EventStreamAnswer extends StreamedAnswer {
  readonly #feed: OpenFeed;
  readonly #options: EventStreamOptions;

  constructor(feed: OpenFeed, options: EventStreamOptions) {
    super();
    this.#feed = feed;
    this.#options = options;
  }

  send(ctx: Context): void {
    const stream = new PassThrough({ highWaterMark: BUFFER_BYTES });
    ctx.type = 'text/event-stream';
    ctx.set('Cache-Control', 'no-cache, no-transform');
    // Proxies such as nginx buffer answers unless told not to.
    ctx.set('X-Accel-Buffering', 'no');
    ctx.body = stream;
    // The stream is written from here on; the request has had its answer status.
    void this.#pump(stream, ctx);
  }

  async #pump(stream: PassThrough, ctx: Context): Promise<void> {
    const feed = this.#feed;
    const heartbeatMs = this.#options.heartbeatMs ?? HEARTBEAT_MS;
    const slowReaderMs = this.#options.slowReaderMs ?? SLOW_READER_MS;
    let lastWrite = Date.now();
    let writtenCursor = feed.start;
    const write = (text: string) => {
      lastWrite = Date.now();
      return stream.write(text);
    };
    const gone = () => feed.close();
    ctx.res.once('close', gone);
    stream.once('close', gone);
    const expiry =
      this.#options.expiresAtMs === undefined ? undefined : setTimeout(() => feed.close('CREDENTIAL_EXPIRED'), Math.max(0, this.#options.expiresAtMs - Date.now()));
    const heartbeat = setInterval(() => {
      if (Date.now() - lastWrite >= heartbeatMs) {
        writtenCursor = feed.cursor;
        write(`id: ${writtenCursor}\n: heartbeat\n\n`);
      }
    }, Math.min(heartbeatMs, 1000));
    try {
      write(`retry: 2000\nid: ${feed.start}\n: following; resume with this id as Last-Event-ID or ?cursor=\n\n`);
      for (;;) {
        const event = await feed.next();
        if (event === undefined) break;
        if (event.type === 'progress') {
          // A newer position is worth a heartbeat only once a heartbeat is due.
          if (event.cursor !== writtenCursor && Date.now() - lastWrite >= heartbeatMs) {
            writtenCursor = event.cursor;
            write(`id: ${event.cursor}\n: heartbeat\n\n`);
          }
          continue;
        }
        writtenCursor = event.cursor;
        if (!write(`id: ${event.cursor}\nevent: change\ndata: ${this.#options.render(event)}\n\n`) && !(await drained(stream, slowReaderMs))) {
          feed.close('SLOW_READER');
          break;
        }
      }
      const reason: FeedEnd | undefined = feed.ended;
      if (reason !== undefined) stream.write(`id: ${feed.cursor}\nevent: end\ndata: ${JSON.stringify({ reason, cursor: feed.cursor })}\n\n`);
    } finally {
      clearInterval(heartbeat);
      if (expiry !== undefined) clearTimeout(expiry);
      ctx.res.off('close', gone);
      feed.close();
      stream.end();
    }
  }
}

/** Whether the reader took the stream's buffer within `ms`. */
function drained(stream: PassThrough, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (taken: boolean) => {
      clearTimeout(timer);
      stream.off('drain', onDrain);
      stream.off('close', onClose);
      resolve(taken);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(false), ms);
    stream.once('drain', onDrain);
    stream.once('close', onClose);
  });
}
