import { waitUntil } from '@iop/dispatch/testing';
import type { StatusSnapshot } from '@iop/status';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StatusPusher } from './status-pusher';

/** A local control plane: records each POST (time, body) and answers with `respond`. */
class Receiver {
  readonly posts: { at: number; body: StatusSnapshot }[] = [];
  current = 0;
  maxConcurrent = 0;
  respond: (res: ServerResponse) => void = (res) => res.writeHead(204).end();
  private server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      this.current++;
      this.maxConcurrent = Math.max(this.maxConcurrent, this.current);
      res.on('close', () => this.current--);
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        this.posts.push({ at: performance.now(), body: JSON.parse(body) as StatusSnapshot });
        this.respond(res);
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/api/v1/edge/status`;
  }

  gaps(): number[] {
    return this.posts.slice(1).map((p, i) => p.at - this.posts[i].at);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const snapshot = (): Promise<StatusSnapshot> => Promise.resolve({ generated_at: new Date().toISOString(), nodes: [] });

describe('StatusPusher (optional push of the snapshot)', () => {
  let receiver: Receiver;
  let pusher: StatusPusher | undefined;
  beforeEach(async () => {
    receiver = new Receiver();
    await receiver.start();
  });
  afterEach(async () => {
    await pusher?.close();
    pusher = undefined;
    await receiver.close();
  });

  it('POSTs the snapshot as JSON every interval_ms while the receiver answers 2xx', async () => {
    pusher = new StatusPusher({ url: receiver.url, intervalMs: 50, snapshot });
    pusher.start();
    await waitUntil(() => receiver.posts.length >= 4, 5000, '4 pushes');
    expect(Date.parse(receiver.posts[0].body.generated_at)).not.toBeNaN();
    // Each gap is about one interval (no backoff while healthy).
    expect(Math.max(...receiver.gaps().slice(0, 3))).toBeLessThan(400);
    expect(pusher.consecutiveFailures).toBe(0);
  });

  it('backs off exponentially (capped) while the receiver answers 500, and returns to the interval after a success', async () => {
    receiver.respond = (res) => res.writeHead(500).end('{"error":"down"}');
    const errors: number[] = [];
    const delays: number[] = [];
    const p: StatusPusher = new StatusPusher({
      url: receiver.url,
      intervalMs: 40,
      maxBackoffMs: 320,
      snapshot,
      onError: (_e, n) => {
        errors.push(n);
        delays.push(p.nextDelayMs());
      },
    });
    pusher = p;
    pusher.start();
    await waitUntil(() => receiver.posts.length >= 6, 10_000, '6 failing pushes');
    // The delays the pusher scheduled: 40·2^n capped at 320.
    expect(delays.slice(0, 5)).toEqual([80, 160, 320, 320, 320]);
    expect(errors.slice(0, 3)).toEqual([1, 2, 3]);
    // And the receiver saw them as gaps (loosely: the receiver shares this process's event loop).
    const gaps = receiver.gaps().slice(0, 5);
    expect(gaps[1]).toBeGreaterThan(gaps[0] * 1.3);
    expect(gaps[3]).toBeGreaterThanOrEqual(280);
    expect(gaps[4]).toBeLessThan(320 * 2);

    receiver.respond = (res) => res.writeHead(200).end('{}');
    const before = receiver.posts.length;
    await waitUntil(() => receiver.posts.length >= before + 3, 5000, 'pushes after recovery');
    expect(pusher.consecutiveFailures).toBe(0);
    expect(pusher.nextDelayMs()).toBe(40);
    const recovered = receiver.gaps().slice(before);
    expect(Math.min(...recovered)).toBeLessThan(200);
  });

  it('times out a receiver that never answers, and never has more than one request in flight', async () => {
    receiver.respond = () => undefined; // hang
    const errors: string[] = [];
    pusher = new StatusPusher({
      url: receiver.url,
      intervalMs: 20,
      timeoutMs: 100,
      maxBackoffMs: 40,
      snapshot,
      onError: (e) => errors.push(e.message),
    });
    pusher.start();
    await waitUntil(() => errors.length >= 3, 5000, '3 timeouts');
    expect(errors[0]).toMatch(/no answer within 100 ms/);
    expect(receiver.maxConcurrent).toBe(1);
  });

  it('checks its options', () => {
    expect(() => new StatusPusher({ url: 'ftp://x', intervalMs: 10, snapshot })).toThrow(/http/);
    expect(() => new StatusPusher({ url: 'http://x', intervalMs: 0, snapshot })).toThrow(/intervalMs/);
    expect(() => new StatusPusher({ url: 'http://x', intervalMs: 100, maxBackoffMs: 50, snapshot })).toThrow(
      /maxBackoffMs/,
    );
  });
});
