import { leaseAddresses, queueProviders, readClientCounts } from '@iop/dispatch';
import { judgedCalls, type JournalCall, type JudgedCall, type WaitingSample } from '@iop/fake-upstream';
import { parseConfigText } from '@iop/validate';
import { Redis } from 'ioredis';
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import type { ServiceProcess } from './service-process';
import type { TargetLauncher } from './bench-targets';
import {
  FLOW_BENCH_CLIENTS,
  flowYaml,
  RETRY_PAUSE_MS,
  type FlowAnswers,
  type FlowClientId,
  type FlowOptions,
} from './flow-config';
import { judgeFlow, type FlowResults } from './flow-judging';
import type { Log } from './scenarios';

/** Between two reads of the clients' waiting counts, ms. */
const SAMPLE_EVERY_MS = 10;

/**
 * Scenario "flow": a mixed run of `seconds` against `replicas` gateways on a Redis of their own and a
 * journaling upstream (docs/architecture.md, "Clients, priority and fair share"). Every client keeps
 * its lanes busy (requests sent to the replicas in turn); the clients' waiting counts are read from
 * Redis every {@link SAMPLE_EVERY_MS} ms. Then the journal is judged (`judgeFlow`): each band-0
 * client's share of grants while backlogged against its weight's share, the pairs' shares, and
 * priority inversions.
 */
export async function runFlow(launcher: TargetLauncher, opts: FlowOptions, log: Log): Promise<FlowResults> {
  const started: ServiceProcess[] = [];
  const redis = await launcher.startRedis('redis-server (flow)');
  started.push(redis.process);
  let sampler: Redis | undefined;
  try {
    const upstream = await launcher.startJournalUpstream('flow-upstream');
    started.push(upstream.process);
    const yaml = flowYaml(upstream.v1, opts.seconds);
    const parsed = parseConfigText(yaml, {});
    if (!parsed.ok) throw new Error(`flow: the scenario's edge.yaml is invalid: ${JSON.stringify(parsed.problems)}`);
    const { shardTag } = leaseAddresses(parsed.config, ['p1'])[0];
    const pool = queueProviders(parsed.config).find((p) => p.providerId === 'p1')?.pool ?? 'pool.p1';
    const gateways = await launcher.startGateways('flow', yaml, opts.replicas, redis.url);
    started.push(...gateways.processes);
    sampler = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    const read = sampler;

    const stop = new AbortController();
    // Every outstanding request listens to it.
    setMaxListeners(0, stop.signal);
    const agent = new Agent({ connections: 256 });
    const answers = Object.fromEntries(
      FLOW_BENCH_CLIENTS.map((c) => [c.id, { ok: 0, queueFull: 0, other: 0 }]),
    ) as FlowAnswers;
    let next = 0;
    const url = () => `${gateways.origins[next++ % gateways.origins.length]}/v1/chat/completions`;
    const lane = async (tag: number, delayStart: number) => {
      const c = FLOW_BENCH_CLIENTS[tag];
      const pause = 'pauseMs' in c ? c.pauseMs : undefined;
      await sleep(delayStart);
      while (!stop.signal.aborted) {
        const status = await send(agent, url(), c.id, tag, opts.holdMs, stop.signal);
        if (stop.signal.aborted) break;
        const a = answers[c.id];
        if (status === 200) a.ok++;
        else if (status === 429) a.queueFull++;
        else a.other++;
        const restMs = status !== 200 ? RETRY_PAUSE_MS : pause ? pause[0] + Math.random() * (pause[1] - pause[0]) : 0;
        if (restMs > 0) await sleep(restMs, undefined, { signal: stop.signal }).catch(() => undefined);
      }
    };
    const samples: WaitingSample[] = [];
    const sampling = (async () => {
      while (!stop.signal.aborted) {
        const sentAt = Date.now();
        const counts = await readClientCounts(read, 'iop-bench-flow', [shardTag]);
        // Date.now() floors to the ms: the read was answered before the next whole ms.
        const receivedAt = Date.now() + 1;
        samples.push({
          sentAt,
          receivedAt,
          waiting: new Map(counts.filter((c) => c.pool === pool).map((c) => [c.clientId, c.queued])),
        });
        await sleep(SAMPLE_EVERY_MS);
      }
    })();
    log(
      `flow: ${opts.seconds} s, ${opts.replicas} replica(s), pool of 2 providers × 1 slot, calls held ${opts.holdMs} ms; ` +
        FLOW_BENCH_CLIENTS.map((c) => `${c.id} (band ${c.band}, weight ${c.weight}, ${c.lanes} outstanding)`).join(
          ', ',
        ),
    );
    const startedAt = Date.now();
    // Band 0 first, so its backlog stands when the higher and the sheddable bands join.
    const lanes = FLOW_BENCH_CLIENTS.flatMap((c, tag) =>
      Array.from({ length: c.lanes }, () => lane(tag, c.band === 0 ? 0 : 1000)),
    );
    await sleep(opts.seconds * 1000);
    const stoppedAt = Date.now();
    stop.abort();
    await Promise.all([...lanes, sampling]);
    await agent.close();
    // The aborted calls end at the upstream as the gateways cancel them.
    await sleep(1000);
    const journal = (await (await fetch(`${upstream.origin}/__calls`)).json()) as JournalCall[];
    const calls: JudgedCall[] = judgedCalls(journal, FLOW_BENCH_CLIENTS);
    return judgeFlow({ opts, calls, samples, answers, startedAt, stoppedAt });
  } finally {
    sampler?.disconnect();
    for (const p of started.reverse()) await launcher.stopService(p);
  }
}

/** One request of client `id` (its key, its tag), held `holdMs` at the upstream. @returns its status, 0 for none. */
async function send(
  agent: Agent,
  url: string,
  id: FlowClientId,
  tag: number,
  holdMs: number,
  signal: AbortSignal,
): Promise<number> {
  try {
    const res = await request(url, {
      method: 'POST',
      dispatcher: agent,
      signal,
      headers: { 'content-type': 'application/json', authorization: `Bearer flow-${id}` },
      body: JSON.stringify({
        model: 'flow',
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 8,
        fake: { delay_ms: holdMs, tag },
      }),
    });
    await res.body.text();
    return res.statusCode;
  } catch {
    return 0;
  }
}
