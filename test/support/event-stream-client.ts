/**
 * A Server-Sent Events reader as a browser's EventSource parses the stream (WHATWG HTML, "Event
 * stream interpretation"): `id:` sets the last event ID even on a block without data, comments are
 * skipped, `event:` names the event. Written here rather than taken from a library so that the
 * test sees every heartbeat id, which EventSource hides.
 */
export interface StreamEvent {
  readonly event: string;
  readonly data: string;
  /** The last event ID once this block was read. */
  readonly id: string;
}

export class EventStreamClient {
  readonly events: StreamEvent[] = [];
  /** Blocks without data (heartbeats), as the last event ID they left. */
  readonly heartbeats: string[] = [];
  lastEventId = '';
  status = 0;
  contentType = '';
  ended = false;
  readonly #abort = new AbortController();
  #reading: Promise<void> | undefined;

  static async open(url: string, headers: Record<string, string> = {}): Promise<EventStreamClient> {
    const client = new EventStreamClient();
    const response = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: client.#abort.signal });
    client.status = response.status;
    client.contentType = response.headers.get('content-type') ?? '';
    if (response.status !== 200 || response.body === null) {
      client.body = await response.text();
      client.ended = true;
      return client;
    }
    client.#reading = client.#read(response.body);
    return client;
  }

  /** The body of an answer that was not a stream. */
  body = '';

  /** The `data` of the change events, parsed. */
  get changes(): Array<Record<string, unknown>> {
    return this.events.filter((event) => event.event === 'change').map((event) => JSON.parse(event.data) as Record<string, unknown>);
  }

  async until(ready: (client: EventStreamClient) => boolean, what: string, ms = 20_000): Promise<void> {
    const until = Date.now() + ms;
    while (!ready(this)) {
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}; events: ${JSON.stringify(this.events).slice(0, 2000)}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  async close(): Promise<void> {
    this.#abort.abort();
    await this.#reading?.catch(() => undefined);
  }

  async #read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    let data: string[] = [];
    let event = '';
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true });
        let newline: number;
        while ((newline = buffer.search(/\r\n|\r|\n/)) !== -1) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
          if (line === '') {
            if (data.length === 0) this.heartbeats.push(this.lastEventId);
            else this.events.push({ event: event || 'message', data: data.join('\n'), id: this.lastEventId });
            data = [];
            event = '';
            continue;
          }
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon === -1 ? line : line.slice(0, colon);
          const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'data') data.push(value);
          else if (field === 'event') event = value;
          else if (field === 'id' && !value.includes('\0')) this.lastEventId = value;
        }
      }
    } finally {
      this.ended = true;
    }
  }
}
