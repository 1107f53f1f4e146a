import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChunkSink, StreamBody } from '../../adapters/chunk-feed';
import type { GatewayResponse } from '../gateway-handler';
import { sendUpstream, type SendResult } from './send-upstream';

/**
 * `sendUpstream`'s push relay against a real socket whose client does not read: the feed is paused
 * while the socket is full and resumed once it drains, a last chunk that comes while it waits is
 * written once and waited for once, and the answer ends whole with nothing left listening.
 */
const BIG = `data: {"choices":[{"delta":{"content":"${'x'.repeat(1 << 20)}"}}]}\n\n`;
const LAST = 'data: [DONE]\n\n';

/** A streamed body whose feed the test drives by hand. */
function handFed() {
  const control = { sink: undefined as ChunkSink | undefined, paused: false, resumes: 0, stopped: false };
  const body: StreamBody = {
    [Symbol.asyncIterator]: () => {
      throw new Error('the relay reads the feed');
    },
    feed: () => ({
      start: (sink) => void (control.sink = sink),
      pause: () => void (control.paused = true),
      resume: () => {
        control.paused = false;
        control.resumes++;
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
async function relay(body: StreamBody) {
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
        idleTimeoutMs: 30_000,
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
});
