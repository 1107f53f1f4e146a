import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChunkSink, StreamBody } from '../../adapters/chunk-feed';
import type { GatewayResponse } from '../gateway-handler';
import { sendUpstream, type SendOptions, type SendResult } from './send-upstream';

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
async function relay(body: StreamBody, idleTimeoutMs = 30_000, clientQueue?: SendOptions['clientQueue']) {
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
        clientQueue,
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

  it('keeps a client whose kernel send queue shrinks though its socket never drains, and cuts it once the queue stands still', async () => {
    // What a client reading in bursts looks like from the gateway: Linux wakes a writer only once half
    // of its send queue is free, so a client that takes a few hundred KB at a time out of megabytes
    // gives no `drain`, while the kernel's queue to it shrinks (kernel-send-queue.spec reads that
    // queue on real connections). Here the client reads nothing, so no `drain` comes at all, and the
    // queue's readings are the test's: shrinking for 3 idle timeouts, then standing still.
    const { body, control } = handFed();
    let queued = 4_000_000;
    let reading = true;
    let lastShrinkAt = 0;
    let readings = 0;
    const sockets = new Set<unknown>();
    const { res, result, answer } = await relay(body, 800, async (socket) => {
      sockets.add(socket);
      readings++;
      if (reading) {
        queued -= 1000;
        lastShrinkAt = performance.now();
      }
      return queued;
    });
    const clientSocket = res().socket;
    // The upstream always has more: whenever the feed runs, it gets chunks until it pauses.
    const upstream = setInterval(() => {
      while (!control.paused) control.sink?.chunk(Buffer.from(BIG));
    }, 5);
    try {
      (await answer).pause();
      // The kernel's buffers fill: from then on the socket never drains.
      while (!control.paused || performance.now() - control.pausedAt < 200) await sleep(20);
      const drains = control.resumes;
      await sleep(2400);
      expect(res().destroyed).toBe(false);
      expect(control.resumes).toBe(drains);
      expect(readings).toBeGreaterThanOrEqual(3);
      reading = false;
      expect(await result()).toEqual({ outcome: 'client_stalled' });
    } finally {
      clearInterval(upstream);
    }
    // Cut a whole timeout after the last reading that showed a shrink, not before.
    expect(performance.now() - lastShrinkAt).toBeGreaterThanOrEqual(790);
    // The readings were asked for the client's own socket.
    expect([...sockets]).toEqual([clientSocket]);
    expect(res().destroyed).toBe(true);
    expect(control.stopped).toBe(true);
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
