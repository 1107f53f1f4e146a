import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChunkSink, StreamBody } from '../../adapters/chunk-feed';
import type { GatewayResponse } from '../gateway-handler';
import { sendUpstream, type SendResult } from './send-upstream';

/**
 * `sendUpstream`'s push relay against a real socket whose client does not read: the feed is paused
 * while the socket is full and resumed once it drains, a last chunk that comes while it waits is
 * written once and waited for once, and the answer ends whole with nothing left listening; a client
 * that reads in bursts too small for the socket to drain is kept, one that reads nothing is cut.
 */
const BIG = `data: {"choices":[{"delta":{"content":"${'x'.repeat(1 << 20)}"}}]}\n\n`;
const LAST = 'data: [DONE]\n\n';

/** A streamed body whose feed the test drives by hand. */
function handFed() {
  const control = {
    sink: undefined as ChunkSink | undefined,
    paused: false,
    resumes: 0,
    stopped: false,
    /** When the feed was last paused (performance.now()), and the longest it stayed paused, ms. */
    pausedAt: 0,
    longestPause: 0,
  };
  const body: StreamBody = {
    [Symbol.asyncIterator]: () => {
      throw new Error('the relay reads the feed');
    },
    feed: () => ({
      start: (sink) => void (control.sink = sink),
      pause: () => {
        control.paused = true;
        control.pausedAt = performance.now();
      },
      resume: () => {
        control.paused = false;
        control.resumes++;
        control.longestPause = Math.max(control.longestPause, performance.now() - control.pausedAt);
      },
      stop: () => void (control.stopped = true),
    }),
  };
  return { body, control };
}

let server: Server;
afterEach(async () => {
  // A failed test may leave its client unread: its connection must not hold the server open.
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
});

/** Starts a server that relays `body`, and a client that does not read until told to. */
async function relay(body: StreamBody, idleTimeoutMs = 30_000) {
  let res!: GatewayResponse;
  let result!: Promise<SendResult>;
  server = createServer((_req, r) => {
    res = r as GatewayResponse;
    res.locals = {};
    result = sendUpstream(
      res,
      { kind: 'sse', status: 200, body },
      {
        endpoint: 'chat',
        onFirstByte: () => undefined,
        idleTimeoutMs,
        abortUpstream: () => undefined,
        clientError: (err) => err,
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const answer = new Promise<IncomingMessage>((resolve) => request({ port, method: 'POST' }, resolve).end());
  const turn = () => new Promise((r) => setTimeout(r, 20));
  while (res === undefined) await turn();
  return { res: () => res, result: () => result, answer, turn };
}

describe('sendUpstream (push relay)', () => {
  it('pauses the feed while the socket is full, writes a last chunk that comes meanwhile once, and ends whole', async () => {
    const { body, control } = handFed();
    const { res, result, answer, turn } = await relay(body);
    let sent = 0;
    while (!control.paused) {
      control.sink?.chunk(Buffer.from(BIG));
      sent++;
      if (sent > 64) throw new Error('the socket never filled');
    }
    const waitingOn = res().listenerCount('drain');
    // The feed's last chunk and its end arrive while the relay waits for the socket.
    control.sink?.chunk(Buffer.from(LAST));
    expect(res().listenerCount('drain')).toBe(waitingOn);
    control.sink?.end();
    const reply = await answer;
    let text = '';
    reply.setEncoding('utf8');
    for await (const part of reply) text += part;
    expect(await result()).toEqual({ outcome: 'done' });
    expect(text).toBe(BIG.repeat(sent) + LAST);
    expect(control.stopped).toBe(false);
    await turn();
    // Nothing of the relay's is left listening on the finished response.
    expect(res().listeners('drain').length).toBeLessThan(waitingOn);
  });

  it('resumes the feed once the client reads, and stops it when the client is gone', async () => {
    const { body, control } = handFed();
    const { res, result, answer, turn } = await relay(body);
    while (!control.paused) control.sink?.chunk(Buffer.from(BIG));
    const reply = await answer;
    reply.resume();
    while (control.paused) await turn();
    expect(control.resumes).toBe(1);
    while (!control.paused) control.sink?.chunk(Buffer.from(BIG));
    reply.destroy();
    while (!res().destroyed) await turn();
    expect(await result()).toEqual({ outcome: 'client_gone' });
    expect(control.stopped).toBe(true);
  });

  it('keeps a client that reads in bursts too small for its socket to drain, past the idle timeout', async () => {
    // Linux wakes a writer only once a third of its send queue is free (free space ≥ half of what is
    // queued): a client that reads 512 KB every 600 ms out of a queue of megabytes moves for 4.5 s (3
    // idle timeouts) with no `drain` for longer than the timeout. (A read under about 1/16 of the
    // client's receive buffer opens no window, so nothing moves on the wire: it would not count.)
    const { body, control } = handFed();
    const { res, result, answer } = await relay(body, 1500);
    const chunk = `data: {"choices":[{"delta":{"content":"${'y'.repeat(64 * 1024)}"}}]}\n\n`;
    const total = 400;
    let sent = 0;
    let ended = false;
    // The upstream always has more: whenever the feed runs, it gets chunks until it pauses or ends.
    const upstream = setInterval(() => {
      while (!control.paused && sent < total) {
        control.sink?.chunk(Buffer.from(chunk));
        sent++;
      }
      if (sent === total && !control.paused && !ended) {
        ended = true;
        control.sink?.chunk(Buffer.from(LAST));
        control.sink?.end();
      }
    }, 5);
    try {
      const reply = await answer;
      let got = 0;
      let goal = 0;
      reply.on('data', (d: Buffer) => {
        got += d.length;
        if (got >= goal) reply.pause();
      });
      reply.pause();
      await sleep(300);
      const until = performance.now() + 4500;
      while (performance.now() < until) {
        goal = got + 512 * 1024;
        reply.resume();
        await waitFor(() => got >= goal || res().destroyed);
        await sleep(600);
        expect(res().destroyed).toBe(false);
      }
      // What the test is about: the socket went longer than the idle timeout without draining.
      const pausedNow = control.paused ? performance.now() - control.pausedAt : 0;
      expect(Math.max(control.longestPause, pausedNow)).toBeGreaterThan(1500);
      goal = Infinity;
      reply.resume();
      expect(await result()).toEqual({ outcome: 'done' });
      await waitFor(() => reply.complete);
      expect(got).toBe(total * chunk.length + LAST.length);
    } finally {
      clearInterval(upstream);
    }
  });

  it('cuts a client that reads nothing at the idle timeout, with the upstream still sending', async () => {
    const { body, control } = handFed();
    const { res, result, answer } = await relay(body, 600);
    const upstream = setInterval(() => {
      while (!control.paused) control.sink?.chunk(Buffer.from(BIG));
    }, 5);
    try {
      (await answer).pause();
      const started = performance.now();
      expect(await result()).toEqual({ outcome: 'client_stalled' });
      expect(performance.now() - started).toBeLessThan(600 * 3);
      expect(res().destroyed).toBe(true);
      expect(control.stopped).toBe(true);
    } finally {
      clearInterval(upstream);
    }
  });
});

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Resolves once `done()` holds (polled every 5 ms). */
async function waitFor(done: () => boolean): Promise<void> {
  while (!done()) await sleep(5);
}
