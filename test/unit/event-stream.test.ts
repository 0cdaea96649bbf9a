/**
 * The Server-Sent Events writer of change feeds, on a feed that never runs dry and a response that
 * is never read: the stand-in for a reader too slow to keep up, which a test over a real socket
 * could only make by filling the kernel's buffers too.
 */
import { EventEmitter } from 'node:events';
import type { PassThrough } from 'node:stream';
import { expect } from 'chai';
import type { Context } from 'koa';
import type { FeedEnd, FeedEvent, OpenFeed } from '../../src/service/change-feeds.ts';
import { EventStreamAnswer } from '../../src/http/v2/event-stream.ts';

/** A feed with a change always ready, counting what was taken and how it ended. */
class EndlessFeed {
  readonly start = 'c0';
  cursor = 'c0';
  ended: FeedEnd | undefined;
  closed = false;
  taken = 0;

  next(): Promise<FeedEvent | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    this.taken += 1;
    this.cursor = `c${this.taken}`;
    const change = { key: Buffer.from(`k${this.taken}`), commitMicros: 0n, mutations: [{ type: 'deleteRow' as const }] };
    return new Promise((resolve) => setImmediate(() => resolve({ type: 'change', change, cursor: this.cursor })));
  }

  close(reason?: FeedEnd): void {
    if (this.closed) return;
    this.closed = true;
    this.ended = reason;
  }
}

function fakeContext(): Context & { body: PassThrough } {
  const headers: Record<string, string> = {};
  return { set: (name: string, value: string) => (headers[name] = value), res: new EventEmitter() } as unknown as Context & { body: PassThrough };
}

describe('the event stream of a change feed', () => {
  it('holds a bounded buffer for a reader who takes nothing, then ends the feed SLOW_READER with its cursor', async () => {
    const feed = new EndlessFeed();
    const ctx = fakeContext();
    new EventStreamAnswer(feed as unknown as OpenFeed, { render: () => 'x'.repeat(1000), slowReaderMs: 300, heartbeatMs: 60_000 }).send(ctx);
    const stream = ctx.body;
    const until = Date.now() + 5000;
    while (!feed.closed && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(feed.ended).to.equal('SLOW_READER');
    // About a buffer's worth of 1 KB events, not an unbounded number.
    expect(feed.taken).to.be.within(60, 200);
    // The reader, when it reads at last, finds the end with the cursor of the last event it was given.
    const text = (stream.read() as Buffer | null)?.toString('utf8') ?? '';
    const ids = [...text.matchAll(/^id: (c\d+)$/gm)].map((match) => match[1]);
    const end = /event: end\ndata: (\{.*\})\n\n$/.exec(text)?.[1];
    expect(JSON.parse(end ?? '{}')).to.deep.equal({ reason: 'SLOW_READER', cursor: ids.at(-1) });
  });

  it('writes a heartbeat with the newest cursor when nothing was written for a while', async () => {
    const idle = { start: 'c0', cursor: 'c0', ended: undefined as FeedEnd | undefined, closed: false };
    const feed = {
      ...idle,
      next: () => new Promise<FeedEvent | undefined>(() => undefined),
      close(reason?: FeedEnd) {
        this.closed = true;
        this.ended = reason;
      },
    };
    const ctx = fakeContext();
    new EventStreamAnswer(feed as unknown as OpenFeed, { render: () => '', heartbeatMs: 200 }).send(ctx);
    feed.cursor = 'c7';
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const text = (ctx.body.read() as Buffer | null)?.toString('utf8') ?? '';
    expect(text).to.match(/^retry: 2000\nid: c0\n/);
    expect(text).to.contain('id: c7\n: heartbeat\n\n');
    ctx.res.emit('close');
    expect(feed.closed).to.equal(true);
  });
});
