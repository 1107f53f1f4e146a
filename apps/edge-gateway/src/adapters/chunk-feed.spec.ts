import type { Readable } from 'node:stream';
import { watchChunks } from '../dispatch/watch-chunks';
import { chunkFeed, type ChunkFeed, type StreamBody, type StreamChunk } from './chunk-feed';
import { wholeEvents } from './openai-compat/whole-events';
import {
  CHAT_EVENT as EVENT,
  chatReaderOptions as options,
  DONE_EVENT as DONE,
  handPushedBody,
} from '../testing/sse-reader';

/**
 * A streamed answer read by push (`ChunkFeed`, the relay's path) gives what reading it by its
 * iterator gives: the same chunks, the same end or error, the body closed when the reader stops.
 * For an upstream's SSE body (`wholeEvents`, a feed of its own), for a body that only iterates
 * (pumped by `chunkFeed`), and through a watcher (`watchChunks`).
 */
const text = (chunk: StreamChunk) => (typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
const turn = () => new Promise((r) => setImmediate(r));

/** What a reader saw: the chunks as text, in order, and how it ended. */
interface Seen {
  chunks: string[];
  ended: boolean;
  error?: unknown;
}

/** Reads `body` by its iterator. */
async function iterate(body: StreamBody): Promise<Seen> {
  const seen: Seen = { chunks: [], ended: false };
  try {
    for await (const chunk of body) seen.chunks.push(text(chunk));
  } catch (error) {
    seen.error = error;
  }
  seen.ended = true;
  return seen;
}

/** Reads `body` by its feed; `seen.ended` once the sink had its end (which must come only once). */
function feedInto(body: StreamBody, onChunk?: (chunk: StreamChunk, feed: ChunkFeed) => void) {
  const seen: Seen = { chunks: [], ended: false };
  const feed = chunkFeed(body);
  let ends = 0;
  const done = new Promise<Seen>((resolve) =>
    feed.start({
      chunk: (chunk) => {
        if (seen.ended) throw new Error('a chunk after the end');
        seen.chunks.push(text(chunk));
        onChunk?.(chunk, feed);
      },
      end: (error) => {
        ends++;
        if (ends > 1) throw new Error('a second end');
        seen.ended = true;
        seen.error = error;
        resolve(seen);
      },
    }),
  );
  return { seen, feed, done };
}

/** A hand-pushed body and what to do to it once a reader has started. */
interface Script {
  name: string;
  run(b: Readable, abort: AbortController): void;
}

const scripts: Script[] = [
  {
    name: 'whole events, then the end',
    run: (b) => {
      b.push(EVENT + EVENT);
      b.push(DONE);
      b.push(null);
    },
  },
  {
    name: 'an event split across reads',
    run: (b) => {
      b.push(EVENT.slice(0, 10));
      b.push(EVENT.slice(10) + DONE);
      b.push(null);
    },
  },
  { name: 'closed before its end marker', run: (b) => (b.push(EVENT), b.push(null)) },
  {
    name: 'a read error mid-event',
    run: (b) => (b.push(EVENT + 'data: {"cho'), b.destroy(new Error('socket hang up'))),
  },
  {
    name: 'a read error after the marker cut short',
    run: (b) => (b.push(EVENT + 'data: [DONE]'), b.destroy(new Error('reset'))),
  },
  {
    name: "the call's signal fired",
    run: (b, abort) => (b.push(EVENT), abort.abort(new Error('client gone')), b.destroy(new Error('aborted'))),
  },
  {
    name: "the call's signal fired after the end marker",
    run: (b, abort) => (b.push(EVENT + DONE), abort.abort(new Error('idle')), b.destroy(new Error('aborted'))),
  },
  { name: 'one event over maxEventBytes', run: (b) => (b.push(EVENT), b.push('data: ' + 'x'.repeat(2000))) },
];

describe('ChunkFeed of an upstream SSE body (wholeEvents)', () => {
  it.each(scripts)('gives what its iterator gives: $name', async (script) => {
    const readers = [async (body: StreamBody) => iterate(body), async (body: StreamBody) => feedInto(body).done];
    const [byIterator, byFeed] = await Promise.all(
      readers.map(async (read) => {
        const b = handPushedBody();
        const abort = new AbortController();
        const seen = read(wholeEvents(b, options(abort.signal)));
        await turn();
        script.run(b, abort);
        return seen;
      }),
    );
    expect(byFeed.chunks.join('')).toBe(byIterator.chunks.join(''));
    expect(byFeed.ended).toBe(true);
    expect(byFeed.error === undefined).toBe(byIterator.error === undefined);
    if (byIterator.error !== undefined) {
      expect(byFeed.error).toBeInstanceOf((byIterator.error as Error).constructor);
      expect((byFeed.error as Error).message).toBe((byIterator.error as Error).message);
    }
  });

  it('reads nothing before it starts, and holds the body back while paused', async () => {
    const b = handPushedBody();
    const body = wholeEvents(b, options());
    b.push(EVENT);
    await turn();
    expect(b.readableFlowing).toBeNull();
    let held: ChunkFeed | undefined;
    const { seen, done } = feedInto(body, (_chunk, feed) => {
      feed.pause();
      held = feed;
    });
    await turn();
    expect(seen.chunks).toEqual([EVENT]);
    b.push(EVENT);
    b.push(DONE);
    b.push(null);
    await turn();
    expect(seen.chunks).toEqual([EVENT]);
    expect(b.isPaused()).toBe(true);
    expect(b.readableLength).toBe(EVENT.length + DONE.length);
    held?.resume();
    await turn();
    held?.resume();
    expect(await done).toEqual({ chunks: [EVENT, EVENT, DONE], ended: true, error: undefined });
  });

  it('delivers again on resume, in order, and ends', async () => {
    const b = handPushedBody();
    let held: ChunkFeed | undefined;
    const { seen, done } = feedInto(wholeEvents(b, options()), (_chunk, feed) => {
      feed.pause();
      held = feed;
    });
    await turn();
    b.push(EVENT);
    b.push(EVENT);
    b.push(DONE);
    b.push(null);
    for (let i = 0; i < 3; i++) {
      await turn();
      expect(seen.chunks).toHaveLength(i + 1);
      held?.resume();
    }
    expect(await done).toEqual({ chunks: [EVENT, EVENT, DONE], ended: true, error: undefined });
  });

  it('closes the body when stopped, and tells the sink nothing more', async () => {
    const b = handPushedBody();
    const { seen } = feedInto(wholeEvents(b, options()), (_chunk, feed) => feed.stop());
    await turn();
    b.push(EVENT);
    await turn();
    expect(b.destroyed).toBe(true);
    await turn();
    expect(seen).toEqual({ chunks: [EVENT], ended: false });
  });

  it("ends with the sink's own throw, and closes the body", async () => {
    const b = handPushedBody();
    const boom = new Error('the socket is gone');
    const { done } = feedInto(wholeEvents(b, options()), () => {
      throw boom;
    });
    await turn();
    b.push(EVENT);
    expect(await done).toMatchObject({ chunks: [EVENT], ended: true, error: boom });
    expect(b.destroyed).toBe(true);
  });
});

describe('ChunkFeed of a body that only iterates (chunkFeed pumps it)', () => {
  /** A generator body that records whether it was closed (its `finally` ran). */
  function generated(items: Array<string | Error>) {
    const state = { closed: false, pulled: 0 };
    const body: StreamBody = (async function* () {
      try {
        for (const item of items) {
          state.pulled++;
          if (item instanceof Error) throw item;
          yield item;
        }
      } finally {
        state.closed = true;
      }
    })();
    return { body, state };
  }

  it('gives every chunk in order, then the end', async () => {
    const { body } = generated([EVENT, EVENT, DONE]);
    expect(await feedInto(body).done).toEqual({ chunks: [EVENT, EVENT, DONE], ended: true, error: undefined });
  });

  it("gives the iterator's error as the end", async () => {
    const failure = new Error('stream failed');
    const { body } = generated([EVENT, failure]);
    expect(await feedInto(body).done).toEqual({ chunks: [EVENT], ended: true, error: failure });
  });

  it('pulls nothing while paused, and goes on when resumed', async () => {
    const { body, state } = generated([EVENT, EVENT, DONE]);
    let held: ChunkFeed | undefined;
    const { seen, done } = feedInto(body, (_chunk, feed) => {
      feed.pause();
      held = feed;
    });
    await turn();
    expect(seen.chunks).toHaveLength(1);
    expect(state.pulled).toBe(1);
    held?.resume();
    await turn();
    expect(seen.chunks).toHaveLength(2);
    held?.resume();
    await turn();
    expect(seen.chunks).toEqual([EVENT, EVENT, DONE]);
    // Paused after the last chunk too: the end is pulled only once resumed.
    expect(seen.ended).toBe(false);
    held?.resume();
    expect(await done).toEqual({ chunks: [EVENT, EVENT, DONE], ended: true, error: undefined });
  });

  it('closes the iterator when stopped (as a break would), and tells the sink nothing more', async () => {
    const { body, state } = generated([EVENT, EVENT, DONE]);
    const { seen } = feedInto(body, (_chunk, feed) => feed.stop());
    await turn();
    expect(state.closed).toBe(true);
    expect(seen).toEqual({ chunks: [EVENT], ended: false });
  });

  it("ends with the sink's own throw, and closes the iterator", async () => {
    const { body, state } = generated([EVENT, EVENT, DONE]);
    const boom = new Error('write failed');
    const { done } = feedInto(body, () => {
      throw boom;
    });
    expect(await done).toEqual({ chunks: [EVENT], ended: true, error: boom });
    expect(state.closed).toBe(true);
  });
});

describe('ChunkFeed through a watcher (watchChunks)', () => {
  const sse = (body: StreamBody) => ({ kind: 'sse' as const, status: 200, body });

  it('keeps the source body’s feed, watches each chunk before the sink gets it, and runs its end once', async () => {
    const b = handPushedBody();
    const order: string[] = [];
    let ends = 0;
    const watched = watchChunks(
      sse(wholeEvents(b, options())),
      (chunk) => order.push(`watch ${text(chunk).length}`),
      () => ends++,
    );
    expect(watched.body.feed).toBeDefined();
    const { done } = feedInto(watched.body, (chunk) => order.push(`sink ${text(chunk).length}`));
    await turn();
    b.push(EVENT);
    b.push(DONE);
    b.push(null);
    expect((await done).error).toBeUndefined();
    expect(order).toEqual([
      `watch ${EVENT.length}`,
      `sink ${EVENT.length}`,
      `watch ${DONE.length}`,
      `sink ${DONE.length}`,
    ]);
    expect(ends).toBe(1);
  });

  it("fails the stream with the watcher's throw and closes the source", async () => {
    const b = handPushedBody();
    const bad = new Error('watcher failed');
    let ends = 0;
    const watched = watchChunks(
      sse(wholeEvents(b, options())),
      () => {
        throw bad;
      },
      () => ends++,
    );
    const { done } = feedInto(watched.body);
    await turn();
    b.push(EVENT);
    expect(await done).toEqual({ chunks: [], ended: true, error: bad });
    expect(b.destroyed).toBe(true);
    expect(ends).toBe(1);
  });

  it('runs its end once when the reader stops', async () => {
    const b = handPushedBody();
    let ends = 0;
    const watched = watchChunks(
      sse(wholeEvents(b, options())),
      () => undefined,
      () => ends++,
    );
    feedInto(watched.body, (_chunk, feed) => feed.stop());
    await turn();
    b.push(EVENT);
    await turn();
    expect(b.destroyed).toBe(true);
    expect(ends).toBe(1);
  });

  it('offers no feed over a body that has none: the wrapper never bypasses what it wraps', () => {
    const body: StreamBody = (async function* () {
      yield EVENT;
    })();
    expect(watchChunks(sse(body), () => undefined).body.feed).toBeUndefined();
  });
});
