import { Agent, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Per upstream model: calls open now and the most seen at once. */
export type MeterCounts = Record<string, { current: number; max: number; total: number }>;

/** A stretch of time when a provider had more calls open than its limit. */
export interface Overlap {
  provider: string;
  /** ms from the start of the run. */
  at: number;
  durationMs: number;
  /**
   * How the excess ended: `abort` when the call that brought the count back was one the gateway
   * stopped (it closed the connection: a client disconnect, a fence) — the next call reached the
   * upstream before that connection's close; `finish` when a call completed normally.
   */
  endedBy: 'abort' | 'finish';
  /**
   * The longest stall of the meter's own event loop within a second of the excess's start, in ms:
   * a loop that stalls reads a close and a later request in
   * one turn. Shown with the breach, never an excuse for it.
   */
  loopLagMs: number;
}

/** The meter in front of the upstream: its URL (`/v1`), its counts, how to stop it. */
export interface Meter {
  url: string;
  counts(): MeterCounts;
  overlaps: Overlap[];
  reset(): void;
  close(): Promise<void>;
}

/**
 * A pass-through HTTP front to the fake upstream that measures each provider's concurrency as the
 * gateways cause it: a call starts when its request is in (the body names the upstream model) and
 * ends at the first of: the answer's last byte handed on to the gateway, or the gateway closing the
 * connection (its EOF, seen before any later request of the same event-loop turn). The fake upstream's own counts
 * end a call only once its socket is fully closed, one loop turn later, which under load can show
 * a call that the gateway already stopped overlapping the next one.
 * `limits` is keyed by upstream model; `t0` gives the run's start, in ms since the epoch, for
 * {@link Overlap.at}.
 */
export async function startMeter(
  target: string,
  limits: Record<string, { provider: string; limit: number }>,
  t0: () => number,
): Promise<Meter> {
  const counts: MeterCounts = {};
  const overlaps: Overlap[] = [];
  const open = new Map<string, { since: number }>();
  const lag = watchLoopLag();
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let model = 'other';
      try {
        model = String((JSON.parse(body.toString('utf8')) as { model?: unknown }).model ?? 'other');
      } catch {
        // not JSON: counted under "other"
      }
      const c = (counts[model] ??= { current: 0, max: 0, total: 0 });
      c.total++;
      if (++c.current > c.max) c.max = c.current;
      const limit = limits[model];
      if (limit && c.current > limit.limit && !open.has(model)) open.set(model, { since: Date.now() });
      let live = true;
      const onAbort = () => end('abort');
      const end = (how: 'abort' | 'finish') => {
        if (!live) return;
        live = false;
        // A kept-alive socket carries many calls: each takes its listeners off when it ends.
        req.socket.off('end', onAbort);
        req.socket.off('close', onAbort);
        c.current--;
        const episode = open.get(model);
        if (limit && episode && c.current <= limit.limit) {
          open.delete(model);
          const overlap: Overlap = {
            provider: limit.provider,
            at: episode.since - t0(),
            durationMs: Date.now() - episode.since,
            endedBy: how,
            loopLagMs: 0,
          };
          overlaps.push(overlap);
          // A stall that ended in the turn that read the excess is sampled at the next timer tick.
          setTimeout(() => (overlap.loopLagMs = lag.maxBetween(episode.since - 1000, episode.since + 1000)), 50);
        }
        forward.destroy();
      };
      req.socket.once('end', onAbort);
      req.socket.once('close', onAbort);
      res.once('close', onAbort);
      const forward = httpRequest(
        `${target}${req.url}`,
        { method: req.method, headers: { ...req.headers, host: new URL(target).host }, agent },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          // The call is over for the upstream once its answer's last byte is handed on: the gateway
          // cannot have it (and release its lease) any earlier.
          up.once('end', () => end('finish'));
          up.pipe(res);
          up.on('error', () => res.destroy());
        },
      );
      forward.on('error', () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    overlaps,
    counts: () => JSON.parse(JSON.stringify(counts)) as MeterCounts,
    reset: () => {
      for (const c of Object.values(counts)) {
        c.max = c.current;
        c.total = 0;
      }
    },
    close: async () => {
      lag.stop();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      agent.destroy();
    },
  };
}

/** How late a 5 ms timer fired, sampled over the last few seconds: the meter's own loop stalls. */
function watchLoopLag(): { maxBetween(from: number, to: number): number; stop(): void } {
  const TICK_MS = 5;
  const samples: { at: number; lagMs: number }[] = [];
  let last = Date.now();
  const timer = setInterval(() => {
    const now = Date.now();
    samples.push({ at: now, lagMs: Math.max(0, now - last - TICK_MS) });
    last = now;
    while (samples.length > 0 && samples[0].at < now - 5000) samples.shift();
  }, TICK_MS);
  timer.unref();
  return {
    maxBetween: (from, to) => samples.reduce((m, s) => (s.at >= from && s.at <= to ? Math.max(m, s.lagMs) : m), 0),
    stop: () => clearInterval(timer),
  };
}
