import { startRedis, type TestRedis } from '@iop/dispatch/testing';
import type { JournalCall } from '@iop/fake-upstream';
import type { StatusSnapshot } from '@iop/status';
import { parseConfigText } from '@iop/validate';
import { Redis } from 'ioredis';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { GATEWAY_MAIN, spawnService, writeTempConfig, type ServiceProcess } from '../testing/exporter-fixtures';
import { openAiError } from './answer-outcome';
import { warnLines, type ChaosReport } from './chaos-report';
import { FLOW_CLIENTS, FLOW_PROVIDERS, flowChaosYaml, type FlowClient, type FlowTerms } from './flow-config';
import { callsByTag, capBreaches, firstReach, openAtStarts } from './flow-judge';
import { waitForDrain } from './left-after-drain';
import { startUpstreamChild } from './upstream-child';

/**
 * The flow-control chaos run (README "Tests": chaos; README "Clients, priority and fair share",
 * "Token budgets", "Config refresh"): 3 gateway replicas on a private Redis and one fake upstream in
 * a process of its own that journals every call with the client that sent it. Two phases:
 *
 * 1. **Retry storm** on pool `storm` (2 slots, 4 places in line: 6 places): `flooder` (no cap,
 *    {@link FlowChaosOptions.flooderWorkers} workers, each retrying every `429` at once) against
 *    `polite` (same band and weight, {@link FlowChaosOptions.politeWorkers} workers, pausing
 *    {@link POLITE_PAUSE_MS} after a `429`). Fair share covers the places of a full queue, so
 *    `polite` keeps its places and its share of the grants.
 * 2. **Reloads under load**: `capped` keeps 12 requests outstanding on pool `wide` (8 slots) while
 *    `budgeted` spends its tokens on `metered`; the config file is replaced on every replica (and each
 *    gets a SIGHUP) twice: `capped`'s `max_in_flight` 2 → 6 → 2 and `budgeted`'s `tokens_per_minute`
 *    600 → 1,000,000 → 300. A new cap applies to waiting and running requests at once, fleet-wide;
 *    a new budget to every request admitted after it.
 *
 * Then every outstanding request is dropped, and nothing may be left: no lease, no waiting job, no
 * client count, no parked request, fleet-wide.
 */
export interface FlowChaosOptions {
  /** Length of the retry storm, in s (its first {@link STORM_WARMUP_MS} are not judged). */
  stormSeconds: number;
  /** How long each of the reload phase's three configs is in force, in s. */
  reloadPhaseSeconds: number;
  /** Concurrent requests of `flooder`. @defaultValue 24 */
  flooderWorkers?: number;
  /** Concurrent requests of `polite`. @defaultValue 3 */
  politeWorkers?: number;
  /** The gateway bundle to run (another build to compare against). @defaultValue the built gateway */
  gatewayMain?: string;
  /** Progress lines; silent when absent. */
  log?: (line: string) => void;
}

/** What one flow-control chaos run measured; ms are from the run's start unless named otherwise. */
export interface FlowChaosReport {
  options: Omit<FlowChaosOptions, 'log'>;
  /** Answers per client and outcome (`ok`, `error <status> <code>`, `client_aborted`, `connection_error`, `unshaped <status>`). */
  outcomes: Record<FlowClient, Record<string, number>>;
  storm: {
    /** Grants (calls that reached the upstream) of the judged window, per client. */
    grants: { flooder: number; polite: number };
    /** `polite`'s share of the window's grants, 0 to 1. */
    politeShare: number;
    /**
     * Its fair share given its offered load: min(1/2, politeWorkers / slots). Two backlogged clients of
     * one band and weight share the slots half and half (start-time fair queueing); `polite` cannot
     * use more slots than it has requests.
     */
    dueShare: number;
    /** `/status` samples of the storm pool's places, one every {@link SAMPLE_EVERY_MS}. */
    samples: number;
    /** Share of the samples where `flooder` held every place of the pool (its slots and its line), 0 to 1. */
    flooderAllPlaces: number;
    /** `polite`'s mean places held (in flight + queued) over the samples. */
    politeMeanPlaces: number;
  };
  /** Each reload: when its file was written and when every replica's `/status` showed it in force (ms from the start). */
  reloads: { terms: FlowTerms; writtenAt: number; appliedAt: number }[];
  capped: {
    /** Most calls of `capped` at once at the upstream under each config. */
    peak: { first: number; raised: number; lowered: number };
    /** ms from the raise's file write until the upstream had 6 calls of `capped` at once; undefined: never. */
    raiseStartMs: number | undefined;
    /** ms from the raise's file write until every replica had loaded it. */
    raiseAppliedMs: number;
    /** Calls of `capped` judged against the lowered cap (arrived after every replica loaded it, plus the grace). */
    judgedAfterLower: number;
  };
  budgeted: {
    /** Per config: answers judged, refusals (`429 rate_limit_exceeded`) and the `x-ratelimit-limit-tokens` values seen. */
    phases: { tokensPerMinute: number; answers: number; refused: number; limits: number[] }[];
  };
  leftAfterDrain: ChaosReport['leftAfterDrain'] & { clientInFlight: number; clientQueued: number; parked: number };
  /** Per replica (its URL): its warn and error lines, the last 40. */
  replicaWarnings: Record<string, string[]>;
  violations: string[];
}

/** ms each call is held at the upstream in the storm (`delay_ms`): 2 slots serve 20 calls a second. */
const STORM_HOLD_MS = 100;
/** `polite` waits this long after a `429` before it asks again, in ms. */
export const POLITE_PAUSE_MS = 250;
/** The storm's first ms, while the line fills, are not judged. */
const STORM_WARMUP_MS = 2000;
/** One `/status` sample of the storm pool this often, in ms. */
const SAMPLE_EVERY_MS = 250;
/** Requests `capped` keeps outstanding, each held at the upstream this long (ms): 2 run, 10 parked. */
const CAPPED_WORKERS = 12;
const CAPPED_HOLD_MS = 1500;
/**
 * After every replica loaded the lowered cap, calls granted before it may still run (up to
 * {@link CAPPED_HOLD_MS}) or still be on their way to the upstream: the lowered cap is judged from
 * this long after, in ms.
 */
const LOWER_GRACE_MS = CAPPED_HOLD_MS + 1000;
/** The three configs of the reload phase, in order. */
const RELOAD_TERMS: FlowTerms[] = [
  { cap: 2, tokensPerMinute: 600 },
  { cap: 6, tokensPerMinute: 1_000_000 },
  { cap: 2, tokensPerMinute: 300 },
];

interface Answer {
  /** HTTP status; 0 when no answer came (the connection failed or the client dropped it). */
  status: number;
  outcome: string;
  /** `x-ratelimit-limit-tokens`, when the answer carried it. */
  limitTokens?: number;
  /** When it was sent and when its answer was in hand, ms since the epoch. */
  sentAt: number;
  at: number;
}

/** Runs the flow-control chaos scenario; never throws for a breach (see `violations`), only for a setup failure. */
export async function runFlowChaos(opts: FlowChaosOptions): Promise<FlowChaosReport> {
  const log = opts.log ?? (() => undefined);
  const flooderWorkers = opts.flooderWorkers ?? 24;
  const politeWorkers = opts.politeWorkers ?? 3;
  const violations: string[] = [];
  const outcomes = Object.fromEntries(FLOW_CLIENTS.map((c) => [c, {}])) as Record<FlowClient, Record<string, number>>;
  const tagOf = (client: FlowClient) => FLOW_CLIENTS.indexOf(client);

  const redis: TestRedis = await startRedis({ forceOwn: true });
  const upstream = await startUpstreamChild(
    Object.fromEntries(FLOW_PROVIDERS.map((p) => [p.upstream, { provider: p.id, limit: p.limit }])),
    { journal: true },
  );
  const prefix = `flow-chaos-${process.pid}-${Date.now() % 1e9}`;
  const env = { REDIS_URL: redis.url, UPSTREAM: upstream.url, PREFIX: prefix };
  const firstYaml = flowChaosYaml(RELOAD_TERMS[0]);
  const loaded = parseConfigText(firstYaml, env, 'flow-chaos.yaml');
  if (!loaded.ok) throw new Error(`flow chaos config invalid: ${JSON.stringify(loaded.problems)}`);
  // A directory of its own: the replicas watch it (README "Config refresh").
  const file = writeTempConfig(firstYaml);
  const gatewayMain = opts.gatewayMain ?? GATEWAY_MAIN;
  const startReplica = async (): Promise<ServiceProcess> => {
    const p = await spawnService(gatewayMain, ['serve', '--config', file, '--listen', '127.0.0.1:0'], { env });
    if (!p.url) throw new Error(`a gateway replica did not start:\n${p.output()}`);
    return p;
  };
  const replicas = await Promise.all([startReplica(), startReplica(), startReplica()]);
  const urls = replicas.map((r) => r.url ?? '');
  const reader = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  reader.on('error', () => undefined);
  const startedAt = Date.now();
  const since = (t: number) => t - startedAt;

  const report: FlowChaosReport = {
    options: {
      stormSeconds: opts.stormSeconds,
      reloadPhaseSeconds: opts.reloadPhaseSeconds,
      flooderWorkers,
      politeWorkers,
      ...(opts.gatewayMain ? { gatewayMain: opts.gatewayMain } : {}),
    },
    outcomes,
    storm: {
      grants: { flooder: 0, polite: 0 },
      politeShare: 0,
      dueShare: 0,
      samples: 0,
      flooderAllPlaces: 0,
      politeMeanPlaces: 0,
    },
    reloads: [],
    capped: {
      peak: { first: 0, raised: 0, lowered: 0 },
      raiseStartMs: undefined,
      raiseAppliedMs: -1,
      judgedAfterLower: 0,
    },
    budgeted: { phases: [] },
    leftAfterDrain: {
      inFlight: -1,
      queued: -1,
      jobKeys: -1,
      drainMs: -1,
      clientInFlight: -1,
      clientQueued: -1,
      parked: -1,
    },
    replicaWarnings: {},
    violations,
  };

  /**
   * The requests {@link dropAll} ends: one controller each, as a signal shared by thousands of
   * requests collects a listener per request.
   */
  const open = new Set<AbortController>();
  let dropped = false;
  const dropAll = () => {
    dropped = true;
    for (const c of open) c.abort();
  };
  /** One chat completion of `client` to `url`, held `holdMs` at the upstream; never rejects. */
  const send = async (url: string, client: FlowClient, model: string, holdMs: number) => {
    const sentAt = Date.now();
    const controller = new AbortController();
    const signal = controller.signal;
    open.add(controller);
    const done = (status: number, outcome: string, limitTokens?: number): Answer => {
      const map = outcomes[client];
      map[outcome] = (map[outcome] ?? 0) + 1;
      return { status, outcome, sentAt, at: Date.now(), ...(limitTokens === undefined ? {} : { limitTokens }) };
    };
    try {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer k-${client}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model,
          max_tokens: 20,
          messages: [{ role: 'user', content: 'x' }],
          fake: { delay_ms: holdMs, tag: tagOf(client) },
        }),
        signal,
      });
      const text = await res.text();
      const limitHeader = res.headers.get('x-ratelimit-limit-tokens');
      const limit = limitHeader === null ? undefined : Number(limitHeader);
      if (res.status === 200) return done(200, 'ok', limit);
      const shaped = openAiError(res.status, text);
      if (shaped === undefined) violations.push(`${client}: ${res.status} not OpenAI-shaped: ${text.slice(0, 200)}`);
      else if (res.status >= 500) violations.push(`${client}: ${shaped} with no replica or Redis down`);
      return done(res.status, shaped ?? `unshaped ${res.status}`, limit);
    } catch (err) {
      if (signal.aborted) return done(0, 'client_aborted');
      violations.push(`${client} on ${url}: no answer (${(err as Error).message})`);
      return done(0, 'connection_error');
    } finally {
      open.delete(controller);
    }
  };
  const snapshot = async (url: string) => (await (await fetch(`${url}/status`)).json()) as StatusSnapshot;

  try {
    await upstream.reset(startedAt);

    // 1. The retry storm.
    log('flow chaos: retry storm');
    const stormStart = Date.now();
    const stormEnd = stormStart + opts.stormSeconds * 1000;
    const samples: { flooder: number; polite: number }[] = [];
    const storm = FLOW_PROVIDERS[0];
    const places = storm.limit + storm.maxQueued;
    const worker = async (client: 'flooder' | 'polite', i: number) => {
      for (let n = i; Date.now() < stormEnd; n++) {
        const answer = await send(urls[n % urls.length], client, storm.model, STORM_HOLD_MS);
        if (answer.status !== 200 && client === 'polite') await sleep(POLITE_PAUSE_MS);
      }
    };
    const sampler = async () => {
      for (let n = 0; Date.now() < stormEnd; n++) {
        await sleep(SAMPLE_EVERY_MS);
        if (Date.now() < stormStart + STORM_WARMUP_MS) continue;
        try {
          const pool = (await snapshot(urls[n % urls.length])).pools?.find((p) => p.providers.includes(storm.id));
          const held = (c: FlowClient) => {
            const x = pool?.clients.find((y) => y.client === c);
            return x ? x.in_flight + x.queued : 0;
          };
          samples.push({ flooder: held('flooder'), polite: held('polite') });
        } catch {
          // a replica too busy to answer in time: no sample
        }
      }
    };
    await Promise.all([
      ...Array.from({ length: flooderWorkers }, (_, i) => worker('flooder', i)),
      ...Array.from({ length: politeWorkers }, (_, i) => worker('polite', i)),
      sampler(),
    ]);
    const stormCalls = (await upstream.calls()).filter((c) => c.model === storm.upstream);
    const grants = callsByTag(stormCalls, stormStart + STORM_WARMUP_MS, stormEnd);
    const flooderGrants = grants.get(tagOf('flooder')) ?? 0;
    const politeGrants = grants.get(tagOf('polite')) ?? 0;
    report.storm = {
      grants: { flooder: flooderGrants, polite: politeGrants },
      politeShare: politeGrants / Math.max(1, flooderGrants + politeGrants),
      dueShare: Math.min(1 / 2, politeWorkers / storm.limit),
      samples: samples.length,
      flooderAllPlaces: samples.filter((s) => s.flooder >= places).length / Math.max(1, samples.length),
      politeMeanPlaces: samples.reduce((n, s) => n + s.polite, 0) / Math.max(1, samples.length),
    };
    log(
      `flow chaos: storm done, polite ${(100 * report.storm.politeShare).toFixed(1)}% of ${flooderGrants + politeGrants} grants`,
    );

    // 2. Reloads under load.
    const budgetAnswers: Answer[] = [];
    const cappedLoad = Array.from({ length: CAPPED_WORKERS }, async (_, i) => {
      for (let n = i; !dropped; n++) await send(urls[n % urls.length], 'capped', 'wide', CAPPED_HOLD_MS);
    });
    const budgetLoad = Array.from({ length: 2 }, async (_, i) => {
      for (let n = i; !dropped; n++) {
        const answer = await send(urls[n % urls.length], 'budgeted', 'metered', 20);
        budgetAnswers.push(answer);
        if (answer.status !== 200) await sleep(100);
      }
    });
    const phaseStart = Date.now();
    report.reloads.push({ terms: RELOAD_TERMS[0], writtenAt: -1, appliedAt: since(startedAt) });
    for (const terms of RELOAD_TERMS.slice(1)) {
      await sleep(phaseStart + report.reloads.length * opts.reloadPhaseSeconds * 1000 - Date.now());
      const writtenAt = Date.now();
      replaceFile(file, flowChaosYaml(terms));
      for (const r of replicas) r.child.kill('SIGHUP');
      const appliedAt = await waitForReload(urls, writtenAt, snapshot);
      if (appliedAt === undefined) violations.push(`a replica did not load ${JSON.stringify(terms)} within 10 s`);
      report.reloads.push({ terms, writtenAt: since(writtenAt), appliedAt: since(appliedAt ?? Date.now()) });
      log(`flow chaos: reloaded ${JSON.stringify(terms)} in ${(appliedAt ?? Date.now()) - writtenAt} ms`);
    }
    await sleep(phaseStart + 3 * opts.reloadPhaseSeconds * 1000 - Date.now());
    dropAll();
    await Promise.all([...cappedLoad, ...budgetLoad]);
    const phaseEnd = Date.now();

    // Caps: what the upstream saw of `capped`, against the cap in force.
    const calls: JournalCall[] = await upstream.calls();
    const [, raise, lower] = report.reloads.map((r) => ({
      written: r.writtenAt + startedAt,
      applied: r.appliedAt + startedAt,
    }));
    const allowed = (at: number) => (at < raise.written ? 2 : at < lower.applied + LOWER_GRACE_MS ? 6 : 2);
    for (const b of capBreaches(calls, tagOf('capped'), allowed))
      violations.push(
        `capped: ${b.open} calls at once at the upstream at ${since(b.at)} ms (max_in_flight ${allowed(b.at)})`,
      );
    const starts = openAtStarts(calls, tagOf('capped'));
    const peakIn = (from: number, to: number) =>
      starts.filter((s) => s.at >= from && s.at < to).reduce((m, s) => Math.max(m, s.open), 0);
    const afterLower = starts.filter((s) => s.at >= lower.applied + LOWER_GRACE_MS);
    const reached = firstReach(calls, tagOf('capped'), 6, raise.written);
    report.capped = {
      peak: {
        first: peakIn(phaseStart, raise.written),
        raised: peakIn(raise.written, lower.written),
        lowered: afterLower.reduce((m, s) => Math.max(m, s.open), 0),
      },
      raiseStartMs: reached === undefined || reached >= lower.written ? undefined : reached - raise.written,
      raiseAppliedMs: raise.applied - raise.written,
      judgedAfterLower: afterLower.length,
    };

    // Budgets: the answers of requests sent once every replica had loaded a config, and answered before the next.
    const bounds = report.reloads.map((r, i) => ({
      from: i === 0 ? phaseStart : r.appliedAt + startedAt,
      to: report.reloads[i + 1] ? report.reloads[i + 1].writtenAt + startedAt : phaseEnd,
    }));
    report.budgeted.phases = report.reloads.map((r, i) => {
      const judged = budgetAnswers.filter((a) => a.status !== 0 && a.sentAt >= bounds[i].from && a.at < bounds[i].to);
      return {
        tokensPerMinute: r.terms.tokensPerMinute,
        answers: judged.length,
        refused: judged.filter((a) => a.outcome === 'error 429 rate_limit_exceeded').length,
        limits: [...new Set(judged.map((a) => a.limitTokens ?? -1))],
      };
    });

    // Nothing left: leases and jobs in Redis, the clients' counts and parked requests (fleet-wide, on each replica).
    const left = await waitForDrain(reader, redis.url, prefix, loaded.config, upstream);
    const clientLeft = await waitForClientsDrained(urls, snapshot);
    report.leftAfterDrain = { ...left, ...clientLeft };
    if (
      left.inFlight !== 0 ||
      left.queued !== 0 ||
      left.jobKeys !== 0 ||
      Object.values(clientLeft).some((n) => n !== 0)
    )
      violations.push(`left after the load drained: ${JSON.stringify(report.leftAfterDrain)}`);

    const { overlaps, fakeMax } = await upstream.read();
    for (const o of overlaps)
      violations.push(
        `provider ${o.provider}: over max_concurrency for ${o.durationMs} ms at ${o.at} ms (ended by ${o.endedBy})`,
      );
    for (const p of FLOW_PROVIDERS)
      if ((fakeMax[p.upstream] ?? 0) > p.limit)
        violations.push(`provider ${p.id}: the fake upstream saw ${fakeMax[p.upstream]} at once (limit ${p.limit})`);
    for (const r of replicas) {
      if (r.child.exitCode !== null) violations.push(`replica ${r.url} died:\n${r.output().slice(-1000)}`);
      for (const line of r.output().split('\n'))
        if (line.includes('config reload rejected')) violations.push(`replica ${r.url}: ${line.slice(0, 300)}`);
    }
  } finally {
    for (const r of replicas) report.replicaWarnings[r.url ?? '?'] = warnLines(r.output());
    reader.disconnect();
    await Promise.all(replicas.map((r) => r.stop()));
    await upstream.close();
    await redis.stop();
  }
  return report;
}

/** Replaces `file` whole (written beside, then renamed over it, as a config map is updated). */
function replaceFile(file: string, text: string): void {
  const next = path.join(mkdtempSync(path.join(tmpdir(), 'iop-flow-next-')), 'edge.yaml');
  writeFileSync(next, text);
  renameSync(next, file);
}

/**
 * Waits, up to 10 s, until every replica's `/status` shows a config loaded at or after `writtenAt`
 * (ms since the epoch); resolves to when that reading was in hand (ms since the epoch), or undefined
 * on time-out. Not `config_loaded_at` itself: it is stamped when the file has been read, before the
 * queue has the new terms and the config is swapped in, so a request sent between the two still
 * runs on the old one; `/status` shows the new stamp only once the swap is done.
 */
async function waitForReload(
  urls: readonly string[],
  writtenAt: number,
  snapshot: (url: string) => Promise<StatusSnapshot>,
): Promise<number | undefined> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const loadedAt = await Promise.all(
      urls.map((u) =>
        snapshot(u).then(
          (s) => Date.parse(s.config_loaded_at ?? ''),
          () => NaN,
        ),
      ),
    );
    if (loadedAt.every((t) => t >= writtenAt)) return Date.now();
    await sleep(50);
  }
  return undefined;
}

/**
 * Waits, up to 15 s, until every replica's `/status` shows no client holding or waiting for a lease
 * and no parked request; returns the largest counts any replica showed last (-1: never read).
 */
async function waitForClientsDrained(
  urls: readonly string[],
  snapshot: (url: string) => Promise<StatusSnapshot>,
): Promise<{ clientInFlight: number; clientQueued: number; parked: number }> {
  const deadline = Date.now() + 15_000;
  let left = { clientInFlight: -1, clientQueued: -1, parked: -1 };
  while (Date.now() < deadline) {
    try {
      const snaps = await Promise.all(urls.map(snapshot));
      const most = (f: (s: StatusSnapshot) => number) => Math.max(...snaps.map(f));
      left = {
        clientInFlight: most((s) => (s.clients ?? []).reduce((n, c) => n + (c.in_flight ?? 1), 0)),
        clientQueued: most((s) => (s.clients ?? []).reduce((n, c) => n + (c.queued ?? 1), 0)),
        parked: most((s) => (s.pools ?? []).reduce((n, p) => n + (p.parked ?? 1), 0)),
      };
      if (left.clientInFlight === 0 && left.clientQueued === 0 && left.parked === 0) break;
    } catch {
      // a replica busy: read again
    }
    await sleep(200);
  }
  return left;
}

/** The report as a few readable lines. */
export function formatFlowChaosReport(r: FlowChaosReport): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  return [
    `flow chaos: storm ${r.options.stormSeconds} s (${r.options.flooderWorkers} flooder, ${r.options.politeWorkers} polite workers), reload phases ${r.options.reloadPhaseSeconds} s`,
    `  outcomes: ${FLOW_CLIENTS.map(
      (c) =>
        `${c} {${Object.entries(r.outcomes[c])
          .map(([k, v]) => `${k}: ${v}`)
          .join(', ')}}`,
    ).join('; ')}`,
    `  storm: polite ${pct(r.storm.politeShare)} of ${r.storm.grants.flooder + r.storm.grants.polite} grants (due ${pct(r.storm.dueShare)}); ` +
      `flooder held every place in ${pct(r.storm.flooderAllPlaces)} of ${r.storm.samples} samples; polite held ${r.storm.politeMeanPlaces.toFixed(2)} places on average`,
    `  reloads: ${r.reloads.map((x) => `${JSON.stringify(x.terms)} written ${x.writtenAt} ms, applied ${x.appliedAt} ms`).join('; ')}`,
    `  capped: peak ${r.capped.peak.first} / ${r.capped.peak.raised} / ${r.capped.peak.lowered} (caps 2 / 6 / 2); 6 at once ${r.capped.raiseStartMs ?? 'never'} ms after the raise was written (every replica had it after ${r.capped.raiseAppliedMs} ms); ${r.capped.judgedAfterLower} calls judged after the lower`,
    `  budgeted: ${r.budgeted.phases.map((p) => `tpm ${p.tokensPerMinute}: ${p.answers} answers, ${p.refused} refused, limits seen ${p.limits.join('/')}`).join('; ')}`,
    `  left after drain (${r.leftAfterDrain.drainMs} ms): ${JSON.stringify(r.leftAfterDrain)}`,
    `  violations: ${r.violations.length === 0 ? 'none' : `\n    ${r.violations.slice(0, 20).join('\n    ')}`}`,
  ].join('\n');
}
