import { waitUntil } from '@iop/dispatch/testing';
import type { StatusSnapshot } from '@iop/status';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StatusPusher } from './status-pusher';

/** A control plane that records each request's URL and headers and answers with `respond`. */
async function startReceiver(respond: (res: ServerResponse) => void) {
  const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push({ url: req.url ?? '', headers: req.headers });
      respond(res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const origin = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    seen,
    origin,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const snapshot = (): Promise<StatusSnapshot> => Promise.resolve({ generated_at: new Date().toISOString(), nodes: [] });

describe('StatusPusher: what its URL may carry (README "Security")', () => {
  const closers: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it('never names a query token or a password in the error of a failed push', async () => {
    const receiver = await startReceiver((res) => res.writeHead(500).end());
    closers.push(receiver.close);
    const errors: string[] = [];
    const pusher = new StatusPusher({
      url: `http://ops:pa55word@${receiver.origin}/push?token=s3cr3t-token`,
      intervalMs: 50,
      timeoutMs: 5000,
      snapshot,
      onError: (err) => errors.push(`${err.message} ${String((err as { cause?: unknown }).cause ?? '')}`),
    });
    closers.push(() => pusher.close());
    pusher.start();
    await waitUntil(() => errors.length >= 1, 5000, 'a failed push');
    expect(errors[0]).toContain('answered 500');
    expect(errors.join('\n')).not.toMatch(/s3cr3t-token|pa55word|ops:/);
  });

  it('sends a userinfo URL as HTTP Basic auth, to the URL without it', async () => {
    const receiver = await startReceiver((res) => res.writeHead(204).end());
    closers.push(receiver.close);
    const pusher = new StatusPusher({ url: `http://ops:p%40ss@${receiver.origin}/push`, intervalMs: 1000, snapshot });
    closers.push(() => pusher.close());
    pusher.start();
    await waitUntil(() => receiver.seen.length >= 1, 5000, 'a push');
    expect(receiver.seen[0].url).toBe('/push');
    expect(receiver.seen[0].headers.authorization).toBe(`Basic ${Buffer.from('ops:p@ss').toString('base64')}`);
    expect(pusher.consecutiveFailures).toBe(0);
  });

  it('does not follow a redirect: the snapshot never reaches another host', async () => {
    const elsewhere = await startReceiver((res) => res.writeHead(204).end());
    closers.push(elsewhere.close);
    const redirecting = await startReceiver((res) =>
      res.writeHead(307, { location: `http://${elsewhere.origin}/steal` }).end(),
    );
    closers.push(redirecting.close);
    const errors: string[] = [];
    const pusher = new StatusPusher({
      url: `http://${redirecting.origin}/push`,
      intervalMs: 50,
      timeoutMs: 5000,
      snapshot,
      onError: (err) => errors.push(err.message),
    });
    closers.push(() => pusher.close());
    pusher.start();
    await waitUntil(() => errors.length >= 2, 5000, 'two failed pushes');
    expect(errors[0]).toContain('redirects are not followed');
    expect(elsewhere.seen).toHaveLength(0);
  });
});
