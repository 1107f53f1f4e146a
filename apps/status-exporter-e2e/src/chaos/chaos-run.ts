import { leaseAddresses, queueProviders, readLeaseCounts } from '@iop/dispatch';
import { scanKeys, startRedis, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream } from '@iop/fake-upstream';
import { Agent, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { parseConfigText } from '@iop/validate';
import { Redis } from 'ioredis';
import {
  EXPORTER_MAIN,
  GATEWAY_MAIN,
  spawnService,
  writeTempConfig,
  type ServiceProcess,
} from '../testing/exporter-fixtures';

/**
 * The chaos run (README "Tests": chaos): 3 gateway replicas, the status exporter and a private
 * Redis, on one fake upstream that records its concurrency per provider. Clients send mixed
 * requests (chat and Responses, streamed or not, pooled and CLI, some dropped at a random point);
 * a random replica is SIGKILLed and replaced every few seconds, and Redis is killed and restarted
 * empty once. Everything on 127.0.0.1.
 *
 * What must hold ({@link ChaosReport.violations} lists every breach): no provider ever sees more
 * calls at once than its `max_concurrency`; no lease or waiting job is left once the load drains;
 * every client gets an answer, complete, or an OpenAI-shaped error (a client whose replica was
 * SIGKILLed under it loses its connection: counted apart, not a breach).
 */
export interface ChaosOptions {
  /** How long the load runs, in s. */
  seconds: number;
  /** Concurrent clients. */
  clients: number;
  /** A replica is SIGKILLed (and a new one started) this often, in ms. */
  killEveryMs: number;
  /** Seed of every random choice. */
  seed: number;
  /** Kill and restart Redis once, halfway. @defaultValue true */
  redisRestart?: boolean;
  /** Share of requests the client drops at a random point. @defaultValue 0.15 */
  dropShare?: number;
  /** Progress lines (a kill, the Redis restart); silent when absent. */
  log?: (line: string) => void;
}

export interface ChaosReport {
  options: Omit<ChaosOptions, 'log'>;
  requests: number;
  /** Requests per outcome: `ok`, `error <status> <code>`, `client_aborted`, `lost_with_killed_replica`. */
  outcomes: Record<string, number>;
  /** Requests per kind (`chat`, `chat stream`, `responses`, …). */
  kinds: Record<string, number>;
  kills: number;
  /** ms from spawning a replacement replica to its "listening" line. */
  replicaStartMs: number[];
  redisRestart: { downMs: number; pooledRecoveryMs: number; exporterRecoveryMs: number } | undefined;
  /** Per provider: the upstream's highest concurrency against the limit. */
  concurrency: Record<string, { max: number; limit: number }>;
  /** What was left in Redis after the load drained (and how long draining took). */
  leftAfterDrain: { inFlight: number; queued: number; jobKeys: number; drainMs: number };
  violations: string[];
  /** Kills, the Redis restart and any moment over a limit, in ms from the start. */
  events?: string[];
  /**
   * Per provider: the most calls at once as the fake upstream itself counts them (a call ends there
   * once its socket is closed, one loop turn after the meter sees the close). Over the limit is a
   * breach too: a call the gateway cut keeps its slot until the upstream has seen the close.
   */
  fakeUpstreamMax: Record<string, number>;
  /** Per replica (its URL): its warn and error log lines, the last 40 of each, to explain any breach. */
  replicaWarnings: Record<string, string[]>;
}

const PROVIDERS = [
  { id: 'p2', model: 'pool', upstream: 'up-2', limit: 2 },
  { id: 'p3', model: 'pool', upstream: 'up-3', limit: 3 },
  { id: 'solo', model: 'one', upstream: 'up-1', limit: 1 },
];

/** Per upstream model: calls open now and the most seen at once. */
type MeterCounts = Record<string, { current: number; max: number; total: number }>;

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
}

/** The meter in front of the upstream: its URL (`/v1`), its counts, how to stop it. */
interface Meter {
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
 */
async function startMeter(
  target: string,
  limits: Record<string, { provider: string; limit: number }>,
  t0: () => number,
): Promise<Meter> {
  const counts: MeterCounts = {};
  const overlaps: Overlap[] = [];
  const open = new Map<string, { since: number }>();
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
          overlaps.push({
            provider: limit.provider,
            at: episode.since - t0(),
            durationMs: Date.now() - episode.since,
            endedBy: how,
          });
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
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      agent.destroy();
    },
  };
}

/** The CLI model shipped in the repository (`examples/cli/echo-llm.mjs`). */
const ECHO_LLM = path.resolve(__dirname, '../../../../examples/cli/echo-llm.mjs');

const chaosYaml = () => `
version: 1
gateway: { request_timeout_ms: 20000 }
queue: { prefix: "\${PREFIX}", max_wait_ms: 15000, max_queued: 200 }
health: { interval_ms: 60000, unhealthy_after: 1000 }
nodes:
  - id: n
    adapters:
      - { id: up, type: openai_compat, base_url: "\${UPSTREAM}" }
      - { id: echo, type: cli, command: ["node", ${JSON.stringify(ECHO_LLM)}], env: { ECHO_LLM_CHUNK_MS: "5" } }
    providers:
${PROVIDERS.map((p) => `      - { id: ${p.id}, category: openai_compat, adapter: up, models: [{ name: ${p.model}, upstream: ${p.upstream} }], max_concurrency: ${p.limit} }`).join('\n')}
      - { id: echo-cli, category: cli, adapter: echo, models: [echo] }
`;

/** mulberry32: a small seeded PRNG, so a run can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Replica {
  process: ServiceProcess;
  url: string;
  killedAt?: number;
}

interface Kind {
  name: string;
  weight: number;
  path: '/v1/chat/completions' | '/v1/responses';
  stream: boolean;
  body(random: () => number): Record<string, unknown>;
}

const chatMessages = [{ role: 'user', content: 'chaos' }];
const KINDS: Kind[] = [
  {
    name: 'chat',
    weight: 28,
    path: '/v1/chat/completions',
    stream: false,
    body: (r) => ({ model: 'pool', messages: chatMessages, fake: { delay_ms: Math.floor(r() * 80) } }),
  },
  {
    name: 'chat stream',
    weight: 24,
    path: '/v1/chat/completions',
    stream: true,
    body: (r) => ({
      model: 'pool',
      stream: true,
      messages: chatMessages,
      fake: { chunks: 3 + Math.floor(r() * 6), chunk_gap_ms: 5 + Math.floor(r() * 25) },
    }),
  },
  {
    name: 'responses',
    weight: 10,
    path: '/v1/responses',
    stream: false,
    body: (r) => ({ model: 'pool', input: 'chaos', fake: { delay_ms: Math.floor(r() * 60) } }),
  },
  {
    name: 'responses stream',
    weight: 10,
    path: '/v1/responses',
    stream: true,
    body: (r) => ({
      model: 'pool',
      input: 'chaos',
      stream: true,
      fake: { chunks: 3 + Math.floor(r() * 5), chunk_gap_ms: 10 },
    }),
  },
  {
    name: 'one (max 1)',
    weight: 12,
    path: '/v1/chat/completions',
    stream: false,
    body: (r) => ({ model: 'one', messages: chatMessages, fake: { delay_ms: Math.floor(r() * 40) } }),
  },
  {
    name: 'one stream',
    weight: 8,
    path: '/v1/chat/completions',
    stream: true,
    body: () => ({ model: 'one', stream: true, messages: chatMessages, fake: { chunks: 4, chunk_gap_ms: 10 } }),
  },
  {
    name: 'cli',
    weight: 4,
    path: '/v1/chat/completions',
    stream: false,
    body: () => ({ model: 'echo', messages: chatMessages }),
  },
  {
    name: 'cli stream',
    weight: 4,
    path: '/v1/chat/completions',
    stream: true,
    body: () => ({ model: 'echo', stream: true, messages: chatMessages }),
  },
];
const TOTAL_WEIGHT = KINDS.reduce((n, k) => n + k.weight, 0);
/** Share of requests the client drops at a random point (queued, before the first byte, mid-stream). */
const DROP_SHARE = 0.15;

function pickKind(random: () => number): Kind {
  let x = random() * TOTAL_WEIGHT;
  for (const kind of KINDS) if ((x -= kind.weight) < 0) return kind;
  return KINDS[0];
}

/** An answer is complete when a stream ends with `[DONE]`, `response.completed` or an error event. */
function streamEnded(text: string): boolean {
  return (
    text.includes('data: [DONE]') ||
    text.includes('response.completed') ||
    /data: \{"error"|event: error|"type":"error"/.test(text)
  );
}

/** `error <status> <code>` for an OpenAI-shaped error body, else undefined. */
function openAiError(status: number, text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown; type?: unknown; code?: unknown } };
    if (
      typeof body.error?.message === 'string' &&
      typeof body.error.type === 'string' &&
      typeof body.error.code === 'string'
    )
      return `error ${status} ${body.error.code}`;
  } catch {
    // not JSON
  }
  return undefined;
}

/** Runs the chaos scenario and reports; never throws for a breach (see `violations`), only for a setup failure. */
export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const log = opts.log ?? (() => undefined);
  const random = prng(opts.seed);
  const violations: string[] = [];
  const outcomes: Record<string, number> = {};
  const kinds: Record<string, number> = {};
  const count = (map: Record<string, number>, key: string) => (map[key] = (map[key] ?? 0) + 1);

  const redis: TestRedis = await startRedis({ forceOwn: true });
  const fake = await startFakeUpstream({ name: 'chaos' });
  let runStartedAt = Date.now();
  const upstream = await startMeter(
    fake.url.replace(/\/v1$/, ''),
    Object.fromEntries(PROVIDERS.map((p) => [p.upstream, { provider: p.id, limit: p.limit }])),
    () => runStartedAt,
  );
  const prefix = `chaos-${process.pid}-${Math.floor(random() * 1e9)}`;
  const yaml = chaosYaml();
  const env = { REDIS_URL: redis.url, UPSTREAM: upstream.url, PREFIX: prefix };
  const loaded = parseConfigText(yaml, env, 'chaos.yaml');
  if (!loaded.ok) throw new Error(`chaos config invalid: ${JSON.stringify(loaded.problems)}`);
  const file = writeTempConfig(yaml);
  const startReplica = async (): Promise<Replica> => {
    const process = await spawnService(GATEWAY_MAIN, ['serve', '--config', file, '--listen', '127.0.0.1:0'], { env });
    if (!process.url) throw new Error(`a gateway replica did not start:\n${process.output()}`);
    return { process, url: process.url };
  };
  const replicas: Replica[] = await Promise.all([startReplica(), startReplica(), startReplica()]);
  const all = [...replicas];
  const exporter = await spawnService(EXPORTER_MAIN, ['--config', file, '--listen', '127.0.0.1:0'], { env });
  if (!exporter.url) throw new Error(`the exporter did not start:\n${exporter.output()}`);
  const reader = new Redis(redis.url, { maxRetriesPerRequest: 1, retryStrategy: () => 200 });
  reader.on('error', () => undefined);
  upstream.reset();

  const report: ChaosReport = {
    options: {
      seconds: opts.seconds,
      clients: opts.clients,
      killEveryMs: opts.killEveryMs,
      seed: opts.seed,
      redisRestart: opts.redisRestart ?? true,
      dropShare: opts.dropShare ?? DROP_SHARE,
    },
    requests: 0,
    outcomes,
    kinds,
    kills: 0,
    replicaStartMs: [],
    redisRestart: undefined,
    concurrency: {},
    fakeUpstreamMax: {},
    replicaWarnings: {},
    leftAfterDrain: { inFlight: -1, queued: -1, jobKeys: -1, drainMs: -1 },
    violations,
  };

  const startedAt = Date.now();
  runStartedAt = startedAt;
  const deadline = startedAt + opts.seconds * 1000;
  const live = () => replicas.filter((r) => r.killedAt === undefined);
  /** What happened when, in ms from the start: kills, the Redis restart, any moment over a limit. */
  const events: string[] = [];
  const event = (what: string) => {
    events.push(`${Date.now() - startedAt} ms: ${what}`);
    log(`chaos: ${what}`);
  };
  // Watches the highest counts, so a breach is reported with when it happened.
  const reported = new Set<string>();
  const watch = setInterval(() => {
    const counts = upstream.counts();
    for (const p of PROVIDERS) {
      const max = counts[p.upstream]?.max ?? 0;
      if (max > p.limit && !reported.has(`${p.id}${max}`)) {
        reported.add(`${p.id}${max}`);
        event(`provider ${p.id} reached ${max} calls at once (limit ${p.limit})`);
      }
    }
  }, 20);

  /** One client: requests until the deadline, each classified. */
  const client = async () => {
    while (Date.now() < deadline) {
      const targets = live();
      const replica = targets[Math.floor(random() * targets.length)];
      const kind = pickKind(random);
      const drop = random() < (opts.dropShare ?? DROP_SHARE) ? Math.floor(random() * 300) : undefined;
      const startedAt = Date.now();
      count(kinds, drop === undefined ? kind.name : `${kind.name} (dropped)`);
      report.requests++;
      const controller = new AbortController();
      const timer = drop === undefined ? undefined : setTimeout(() => controller.abort(), drop);
      const lost = () => replica.killedAt !== undefined && replica.killedAt >= startedAt - 50;
      try {
        const res = await fetch(`${replica.url}${kind.path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(kind.body(random)),
          signal: controller.signal,
        });
        const text = await res.text();
        if (res.status === 200) {
          const complete = kind.stream
            ? streamEnded(text)
            : (() => {
                try {
                  JSON.parse(text);
                  return true;
                } catch {
                  return false;
                }
              })();
          if (complete) count(outcomes, 'ok');
          else if (lost()) count(outcomes, 'lost_with_killed_replica');
          else {
            count(outcomes, 'incomplete');
            violations.push(`${kind.name} on ${replica.url}: 200 with an incomplete body: ${text.slice(-200)}`);
          }
        } else {
          const shaped = openAiError(res.status, text);
          if (shaped) count(outcomes, shaped);
          else if (lost()) count(outcomes, 'lost_with_killed_replica');
          else {
            count(outcomes, `unshaped ${res.status}`);
            violations.push(`${kind.name} on ${replica.url}: ${res.status} not OpenAI-shaped: ${text.slice(0, 200)}`);
          }
        }
      } catch (err) {
        if (controller.signal.aborted) count(outcomes, 'client_aborted');
        else if (lost()) count(outcomes, 'lost_with_killed_replica');
        else {
          count(outcomes, 'connection_error');
          violations.push(
            `${kind.name} on ${replica.url}: no answer (${(err as Error).message}; ${(err as { cause?: Error }).cause?.message ?? ''})`,
          );
        }
      } finally {
        clearTimeout(timer);
      }
    }
  };

  /** SIGKILLs a random replica every `killEveryMs` and starts a replacement. */
  const killer = async () => {
    while (opts.killEveryMs > 0 && Date.now() + opts.killEveryMs < deadline) {
      await sleep(opts.killEveryMs * (0.75 + random() * 0.5));
      if (Date.now() >= deadline) break;
      const targets = live();
      if (targets.length < 3) continue;
      const victim = targets[Math.floor(random() * targets.length)];
      victim.killedAt = Date.now();
      victim.process.child.kill('SIGKILL');
      report.kills++;
      event(`SIGKILL ${victim.url}`);
      const spawnedAt = Date.now();
      try {
        const fresh = await startReplica();
        report.replicaStartMs.push(Date.now() - spawnedAt);
        replicas.push(fresh);
        all.push(fresh);
      } catch (err) {
        violations.push(`a replacement replica did not start: ${(err as Error).message}`);
      }
    }
  };

  /** Kills Redis once, halfway, restarts it empty, and measures how long pooled traffic and the exporter take to recover. */
  const redisChaos = async () => {
    if (opts.redisRestart === false) return;
    await sleep((opts.seconds * 1000) / 2);
    event('Redis SIGKILL');
    const downAt = Date.now();
    await redis.kill();
    await sleep(1000);
    await redis.start();
    const upAt = Date.now();
    event('Redis restarted (empty)');
    const pooled = (async () => {
      while (Date.now() - upAt < 30_000) {
        const target = live()[0];
        const res = await fetch(`${target.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'pool', messages: chatMessages }),
        }).catch(() => undefined);
        if (res?.status === 200) return Date.now() - upAt;
        await res?.text().catch(() => undefined);
        await sleep(100);
      }
      violations.push('pooled requests did not recover within 30 s of the Redis restart');
      return -1;
    })();
    const exported = (async () => {
      while (Date.now() - upAt < 30_000) {
        const text = await fetch(`${exporter.url}/metrics`)
          .then((r) => r.text())
          .catch(() => '');
        if (/^iop_edge_status_counts_up 1$/m.test(text)) return Date.now() - upAt;
        await sleep(100);
      }
      violations.push('the exporter did not read counts again within 30 s of the Redis restart');
      return -1;
    })();
    const [pooledRecoveryMs, exporterRecoveryMs] = await Promise.all([pooled, exported]);
    report.redisRestart = { downMs: upAt - downAt, pooledRecoveryMs, exporterRecoveryMs };
  };

  try {
    await Promise.all([...Array.from({ length: opts.clients }, client), killer(), redisChaos()]);

    // Drain: every lease released and every waiting job gone, cluster-wide.
    const ids = queueProviders(loaded.config).map((p) => p.providerId);
    const drainStart = Date.now();
    let left = { inFlight: -1, queued: -1, jobKeys: -1 };
    while (Date.now() - drainStart < 15_000) {
      try {
        const counts = await readLeaseCounts(reader, prefix, leaseAddresses(loaded.config, ids));
        const jobKeys = (await scanKeys(redis.url, `${prefix}:`)).filter((k) =>
          /:provider\.[^:]+:[A-Za-z0-9_-]+\.\d+$/.test(k),
        ).length;
        left = {
          inFlight: [...counts.values()].reduce((n, c) => n + c.inFlight, 0),
          queued: [...counts.values()].reduce((n, c) => n + c.queued, 0),
          jobKeys,
        };
        const open = Object.values(upstream.counts()).reduce((n, c) => n + c.current, 0);
        if (left.inFlight === 0 && left.queued === 0 && jobKeys === 0 && open === 0) break;
      } catch {
        // Redis busy: try again
      }
      await sleep(200);
    }
    report.leftAfterDrain = { ...left, drainMs: Date.now() - drainStart };
    if (left.inFlight !== 0 || left.queued !== 0 || left.jobKeys !== 0)
      violations.push(`left after the load drained: ${JSON.stringify(left)}`);

    const counts = upstream.counts();
    const fakeStats = fake.stats();
    for (const p of PROVIDERS) {
      const max = counts[p.upstream]?.max ?? 0;
      report.fakeUpstreamMax[p.id] = fakeStats.byModel[p.upstream]?.max ?? 0;
      report.concurrency[p.id] = { max, limit: p.limit };
    }
    // Over a limit at the meter or at the fake upstream: a breach, whatever ended it (no excuse).
    for (const o of upstream.overlaps)
      violations.push(
        `provider ${o.provider}: over max_concurrency for ${o.durationMs} ms at ${o.at} ms (ended by ${o.endedBy})`,
      );
    for (const p of PROVIDERS)
      if (report.fakeUpstreamMax[p.id] > p.limit)
        violations.push(
          `provider ${p.id}: the fake upstream saw ${report.fakeUpstreamMax[p.id]} at once (limit ${p.limit})`,
        );
    for (const r of live())
      if (r.process.child.exitCode !== null)
        violations.push(`replica ${r.url} died on its own:\n${r.process.output().slice(-1000)}`);
  } finally {
    clearInterval(watch);
    report.events = events;
    for (const r of all) report.replicaWarnings[r.url] = warnLines(r.process.output());
    reader.disconnect();
    await Promise.all(all.map((r) => (r.killedAt === undefined ? r.process.stop() : Promise.resolve(null))));
    await exporter.stop();
    await upstream.close();
    await fake.close();
    await redis.stop();
  }
  return report;
}

/** The warn (40) and error (50+) lines of a replica's pino output, the last 40. */
function warnLines(output: string): string[] {
  return output
    .split('\n')
    .filter((line) => /"level":(4|5|6)\d/.test(line))
    .slice(-40);
}

/** The report as a few readable lines. */
export function formatChaosReport(r: ChaosReport): string {
  const lines = [
    `chaos: ${r.requests} requests in ${r.options.seconds} s, ${r.options.clients} clients, seed ${r.options.seed}`,
    `  outcomes: ${Object.entries(r.outcomes)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k}: ${v}`)
      .join(', ')}`,
    `  kinds: ${Object.entries(r.kinds)
      .map(([k, v]) => `${k}: ${v}`)
      .join(', ')}`,
    `  replicas SIGKILLed: ${r.kills}; replacement start ms: ${r.replicaStartMs.join(', ') || '—'}`,
    `  Redis restart: ${r.redisRestart ? `down ${r.redisRestart.downMs} ms; pooled requests back after ${r.redisRestart.pooledRecoveryMs} ms, exporter counts after ${r.redisRestart.exporterRecoveryMs} ms` : 'not done'}`,
    `  upstream concurrency, metered (max / limit): ${Object.entries(r.concurrency)
      .map(([id, c]) => `${id} ${c.max}/${c.limit}`)
      .join(', ')}; the fake upstream's own max: ${Object.entries(r.fakeUpstreamMax)
      .map(([id, m]) => `${id} ${m}`)
      .join(', ')}`,
    `  replicas' warn lines: ${Object.values(r.replicaWarnings).reduce((n, l) => n + l.length, 0)} (in report.json)`,
    `  left after drain (${r.leftAfterDrain.drainMs} ms): in_flight ${r.leftAfterDrain.inFlight}, queued ${r.leftAfterDrain.queued}, job keys ${r.leftAfterDrain.jobKeys}`,
    `  events: ${(r.events ?? []).join('; ')}`,
    `  violations: ${r.violations.length === 0 ? 'none' : `\n    ${r.violations.slice(0, 20).join('\n    ')}`}`,
  ];
  return lines.join('\n');
}
