import { Readable } from 'node:stream';
import type { Context } from 'koa';
import type { AnswerHold } from '../../service/answer-budget.ts';
import { type FeedEnd, type FeedEvent, type OpenFeed, changeBytes } from '../../service/change-feeds.ts';
import { SERVICE_LIMITS } from '../../service/limits.ts';
import { jsonAnswerChunks } from '../json/json-answer.ts';
import { StreamedAnswer } from '../operations/streamed-answer.ts';

/** After a first change, how long a long poll waits for more that come right after it. */
const GATHER_MS = 100;
/** How long a long poll with wait=0 looks for changes already there. */
const AT_ONCE_MS = 250;
/** Most changes in one long-poll answer (their bytes are bounded too: SERVICE_LIMITS.pageBytes). */
export const MOST_CHANGES = 1000;

export interface LongPollOptions {
  /** How long to wait for a first change, in seconds (0: only those already there). */
  readonly waitSeconds: number;
  /** A change as the answer shows it. */
  readonly render: (event: Extract<FeedEvent, { type: 'change' }>) => unknown;
  /** The request's share of the answer budget, which the answer's changes are taken from. */
  readonly answer?: AnswerHold | undefined;
}

/**
 * A change feed as one JSON answer, `{changes, cursor[, end]}`: the changes after the start as
 * soon as there is one (and those that come right after it), or none once `waitSeconds` have
 * passed. An answer holds at most MOST_CHANGES changes, and ends before the change that would
 * take its keys, columns and values past SERVICE_LIMITS.pageBytes, or that the answer budget has
 * no room for, as a scan page does: it always holds its first change, however large, and its
 * cursor is the one after its last change, so the next poll starts with the change left out. It is a StreamedAnswer, as an event stream is: the request is done with its slot once
 * the feed is open, and the wait holds only the feed (counted against the bounds on open feeds),
 * so that waiting long polls never crowd out other requests. The status and headers go out with
 * the answer, once it is known. The feed is closed once the answer is written, or the client has
 * gone.
 */
export class LongPollAnswer extends StreamedAnswer {
  readonly #feed: OpenFeed;
  readonly #options: LongPollOptions;

  constructor(feed: OpenFeed, options: LongPollOptions) {
    super();
    this.#feed = feed;
    this.#options = options;
  }

  send(ctx: Context): void {
    ctx.type = 'application/json';
    // Nothing is written until the answer is gathered: the headers go with its first chunk. Koa
    // destroys the stream when the response closes, which ends the generator, and so the feed.
    ctx.body = Readable.from(this.#answer(), { objectMode: false });
  }

  async *#answer(): AsyncGenerator<Buffer> {
    try {
      const answer = await this.#gather();
      // The feed is done with once the answer is known; rendering it needs nothing of it.
      this.#feed.close();
      yield* jsonAnswerChunks(answer);
    } finally {
      this.#feed.close();
    }
  }

  async #gather(): Promise<{ changes: unknown[]; cursor: string; end?: FeedEnd }> {
    const feed = this.#feed;
    const { waitSeconds, render, answer } = this.#options;
    const changes: unknown[] = [];
    let bytes = 0;
    // The cursor of the last event taken here, never of one a pending read took after the answer.
    let cursor = feed.start;
    const deadline = Date.now() + waitSeconds * 1000;
    while (changes.length < MOST_CHANGES) {
      const ms = changes.length > 0 ? GATHER_MS : Math.max(deadline - Date.now(), waitSeconds === 0 ? AT_ONCE_MS : 0);
      if (ms <= 0) break;
      const event = await withTimeout(feed.next(), ms);
      if (event === TIMED_OUT || event === undefined) break;
      if (event.type === 'change') {
        const size = changeBytes(event.change);
        if (changes.length === 0) answer?.take(size);
        // Left for the next poll, which starts at the cursor before it.
        else if (bytes + size > SERVICE_LIMITS.pageBytes || !(answer?.tryTake(size) ?? true)) break;
        bytes += size;
        changes.push(render(event));
      }
      cursor = event.cursor;
    }
    const end: FeedEnd | undefined = feed.ended;
    return { changes, cursor, ...(end === undefined ? {} : { end }) };
  }
}

const TIMED_OUT = Symbol('timed out');

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
