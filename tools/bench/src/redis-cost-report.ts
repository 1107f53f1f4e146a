import type { TargetCheck } from './bench-results';
import { fmtSpread, table } from './markdown';
import { FLOOR_ROUND_TRIPS, type RedisCostResults, type RedisCostRun } from './redis-cost';
import type { Spread } from './stats';

/** Targets of the Redis cost (README "Benchmarks", "Clients, priority and fair share"). */
export const REDIS_LIMITS = {
  /** Redis commands per pooled request, scripts' inner commands counted (fleet mode), with or without clients. */
  commandsPerRequest: 25,
  /** Redis CPU per pooled request without clients, ms. */
  cpuMsPerRequest: 0.15,
  /** Redis CPU per pooled request with clients, bands and fair share configured, ms. */
  cpuMsPerRequestWithClients: 0.1,
  /** Redis CPU per pooled request with clients that have token budgets, ms (docs/architecture.md, "Token budgets"). */
  cpuMsPerRequestWithBudgets: 0.12,
  /** Flow control off costs no more than before flow control: commands per pooled request then (README "Benchmarks"). */
  pooledCommandsBeforeFlowControl: 20.01,
  /** The same per queued request. */
  queuedCommandsBeforeFlowControl: 29.7,
  /** Commands per second of one replica without traffic. */
  idleReplicaCommandsPerS: 20,
} as const;

const verdict = (met: boolean) => (met ? 'met' : 'MISSED');

/** The runs of one variant that measured something. */
const runsOf = (cost: RedisCostResults | undefined, variant: RedisCostRun['variant']) =>
  (cost?.runs ?? []).filter((r) => r.variant === variant && r.commandsPerRequest.n > 0);

const perRun = (runs: readonly RedisCostRun[], pick: (r: RedisCostRun) => string) =>
  runs.map((r) => `×${r.replicas} c=${r.concurrency}: ${pick(r)}`).join('; ');

/** A target over every run of a variant: met when the median of `value` of each run is at most `limit`. */
function limitCheck(
  cost: RedisCostResults | undefined,
  goal: string,
  variant: RedisCostRun['variant'],
  value: (r: RedisCostRun) => Spread | undefined,
  limit: number,
  digits: number,
  unit = '',
): TargetCheck {
  const runs = runsOf(cost, variant).filter((r) => value(r)?.n);
  if (runs.length === 0) return { goal, measured: cost?.error ? `failed: ${cost.error}` : 'not measured', met: null };
  return {
    goal,
    measured: perRun(runs, (r) => `${fmtSpread(value(r), digits)}${unit}`),
    met: runs.every((r) => (value(r)?.median ?? Infinity) <= limit),
  };
}

/**
 * The Redis-cost targets: commands and Redis CPU per pooled request with flow control off (no
 * `gateway.clients`) and on (`-clients`: clients in two bands, weights, both caps), the cost of flow
 * control off against the build before flow control (pooled and queued), commands of an idle replica.
 */
export function redisCostChecks(cost: RedisCostResults | undefined): TargetCheck[] {
  const L = REDIS_LIMITS;
  const idle = (cost?.idle ?? []).filter((r) => Number.isFinite(r.perReplicaPerS));
  const commands = (r: RedisCostRun) => r.commandsPerRequest;
  const cpu = (r: RedisCostRun) => r.cpuMsPerRequest;
  return [
    limitCheck(
      cost,
      `Redis backend, flow control off: ≤ ${L.commandsPerRequest} Redis commands per pooled request (INFO commandstats, scripts' inner commands counted; 1 and 3 replicas)`,
      'pooled',
      commands,
      L.commandsPerRequest,
      2,
    ),
    limitCheck(
      cost,
      `Redis backend, flow control off: no more commands per pooled request than before flow control (${L.pooledCommandsBeforeFlowControl})`,
      'pooled',
      commands,
      L.pooledCommandsBeforeFlowControl,
      2,
    ),
    limitCheck(
      cost,
      `Redis backend, flow control off: no more commands per queued request than before flow control (${L.queuedCommandsBeforeFlowControl})`,
      'contended',
      (r) => r.commandsPerQueuedRequest,
      L.queuedCommandsBeforeFlowControl,
      1,
    ),
    limitCheck(
      cost,
      `Redis backend, flow control off: ≤ ${L.cpuMsPerRequest} ms of Redis CPU per pooled request (used_cpu_sys + used_cpu_user)`,
      'pooled',
      cpu,
      L.cpuMsPerRequest,
      4,
      ' ms',
    ),
    limitCheck(
      cost,
      `Redis backend, flow control on (gateway.clients: 2 bands, weights, max_in_flight, max_queued): ≤ ${L.commandsPerRequest} Redis commands per pooled request`,
      'pooled-clients',
      commands,
      L.commandsPerRequest,
      2,
    ),
    limitCheck(
      cost,
      `Redis backend, flow control on: ≤ ${L.cpuMsPerRequestWithClients} ms of Redis CPU per pooled request`,
      'pooled-clients',
      cpu,
      L.cpuMsPerRequestWithClients,
      4,
      ' ms',
    ),
    limitCheck(
      cost,
      `Redis backend, token budgets on: ≤ ${L.cpuMsPerRequestWithBudgets} ms of Redis CPU per pooled request`,
      'pooled-budgets',
      cpu,
      L.cpuMsPerRequestWithBudgets,
      4,
      ' ms',
    ),
    {
      goal: `Redis backend: an idle replica ≤ ${L.idleReplicaCommandsPerS} Redis commands/s`,
      measured: idle.length
        ? idle.map((r) => `${r.perReplicaPerS.toFixed(1)}/s per replica with ${r.replicas} up`).join('; ')
        : cost?.error
          ? `failed: ${cost.error}`
          : 'not measured',
      met: idle.length ? idle.every((r) => r.perReplicaPerS <= L.idleReplicaCommandsPerS) : null,
    },
  ];
}

/**
 * Flow control off and on side by side, per replica set and concurrency, each figure next to its
 * target and whether it was met: commands and Redis CPU per pooled request, commands per queued
 * request and Redis CPU per request of the contended runs.
 */
export function flowControlCostTable(cost: RedisCostResults): string | undefined {
  const L = REDIS_LIMITS;
  const find = (variant: RedisCostRun['variant'], like: RedisCostRun) =>
    cost.runs.find((r) => r.variant === variant && r.replicas === like.replicas && r.concurrency === like.concurrency);
  const cell = (s: Spread | undefined, digits: number, limit?: number): [string, string] => {
    if (!s?.n) return ['—', limit === undefined ? '' : `≤ ${limit}`];
    return [fmtSpread(s, digits), limit === undefined ? '—' : `≤ ${limit}: ${verdict(s.median <= limit)}`];
  };
  const rows: string[][] = [];
  const add = (
    what: string,
    variant: 'pooled' | 'contended',
    pick: (r: RedisCostRun) => Spread | undefined,
    digits: number,
    limits: [number | undefined, number | undefined],
  ) => {
    for (const off of cost.runs.filter((r) => r.variant === variant)) {
      const on = find(`${variant}-clients`, off);
      rows.push([
        what,
        `×${off.replicas} c=${off.concurrency}`,
        ...cell(off.error ? undefined : pick(off), digits, limits[0]),
        ...cell(on && !on.error ? pick(on) : undefined, digits, limits[1]),
      ]);
    }
  };
  add('Redis commands, pooled request', 'pooled', (r) => r.commandsPerRequest, 2, [
    L.pooledCommandsBeforeFlowControl,
    L.commandsPerRequest,
  ]);
  add('Redis CPU ms, pooled request', 'pooled', (r) => r.cpuMsPerRequest, 4, [
    L.cpuMsPerRequest,
    L.cpuMsPerRequestWithClients,
  ]);
  // Less what two bare round trips cost Redis at the same concurrency (the `floor` run, one connection).
  const floorAt = (c: number) => cost.runs.find((r) => r.variant === 'floor' && r.concurrency === c && !r.error);
  if (cost.runs.some((r) => r.variant === 'floor')) {
    add(
      'Redis CPU ms, pooled request, less the two-round-trip floor',
      'pooled',
      (r) => overFloor(r, floorAt(r.concurrency)),
      4,
      [undefined, undefined],
    );
  }
  add('Redis commands, queued request', 'contended', (r) => r.commandsPerQueuedRequest, 1, [
    L.queuedCommandsBeforeFlowControl,
    undefined,
  ]);
  add('Redis CPU ms per request, contended', 'contended', (r) => r.cpuMsPerRequest, 4, [undefined, undefined]);
  if (rows.length === 0) return undefined;
  return table(
    [
      'per request',
      'replicas, connections',
      'flow control off',
      'target',
      'flow control on (3 clients, 2 bands, weights, both caps)',
      'target',
    ],
    rows,
  );
}

/** `run`'s Redis CPU per request less the floor's median at the same concurrency (undefined without a floor). */
export function overFloor(run: RedisCostRun, floor: RedisCostRun | undefined): Spread | undefined {
  const base = floor?.cpuMsPerRequest;
  if (!base?.n || !run.cpuMsPerRequest.n) return undefined;
  const s = run.cpuMsPerRequest;
  return { ...s, median: s.median - base.median, min: s.min - base.median, max: s.max - base.median };
}

const runName = (r: Pick<RedisCostRun, 'variant' | 'replicas' | 'concurrency'>) =>
  `${r.variant} ×${r.replicas} c=${r.concurrency}`;

/** The Redis-cost section: per-request figures of every run, the breakdown by command, the idle replicas. */
export function redisCostSection(cost: RedisCostResults): string {
  const out: string[] = [];
  const o = cost.options;
  out.push(
    `Redis ${cost.redisVersion} of its own (no persistence); the gateway with the Redis backend on it in front of the fake upstream. ` +
      `Per replica set: ${o.warmupRequests} warm-up requests, ${o.idleSeconds} s without traffic, then ${o.rounds} round(s) of ${o.requests} pooled ` +
      `non-streamed Chat Completions; \`INFO commandstats\` and \`INFO cpu\` read around each window (the reader's own INFO calls left out). ` +
      `pooled: max_concurrency 2000 at c=${o.concurrency.join(', ')} (nothing waits); contended: a fresh set with max_concurrency ${o.contendedMaxConcurrency} ` +
      `at c=${o.contendedConcurrency} (most requests queue); -clients: the same with gateway.clients configured (flow control on); pooled-budgets: pooled with those clients, each with tokens_per_minute and tokens_per_day far above the load (every request reserves and reconciles its tokens). Connections round-robin over the replicas. ` +
      `Load average ${cost.loadAvg[0].toFixed(2)} when this section started, ${cost.loadAvg[1].toFixed(2)} when it ended.`,
  );
  if (cost.error) out.push('', `failed: ${cost.error}`);
  const sideBySide = flowControlCostTable(cost);
  if (sideBySide) {
    out.push('', '**Flow control off and on, side by side** (medians over rounds, (min…max)):', '', sideBySide);
    out.push(
      '',
      `Off: no gateway.clients (every request is the one client \`anonymous\`). On: \`bench-a\` (band 1, weight 3), \`bench-b\` (band 1, weight 1), ` +
        `\`bench-c\` (band 0, weight 2), each with max_in_flight and max_queued; requests take their keys in turn. ` +
        `Targets: off no more than before flow control (${REDIS_LIMITS.pooledCommandsBeforeFlowControl} per pooled, ${REDIS_LIMITS.queuedCommandsBeforeFlowControl} per queued request); ` +
        `on ≤ ${REDIS_LIMITS.commandsPerRequest} commands and ≤ ${REDIS_LIMITS.cpuMsPerRequestWithClients} ms of Redis CPU per pooled request.`,
    );
  }
  const floors = cost.runs.filter((r) => r.variant === 'floor' && !r.error && r.cpuMsPerRequest.n);
  if (floors.length) {
    out.push(
      '',
      `**The round-trip floor.** A pooled request is ${FLOOR_ROUND_TRIPS} round trips to Redis (admit, release). The bare Node proxy ` +
        `making ${FLOOR_ROUND_TRIPS} bare \`PING\`s per request on one connection (before the upstream call and after the answer), ` +
        `under the same load: Redis CPU ${floors.map((r) => `${fmtSpread(r.cpuMsPerRequest, 4)} ms per request at c=${r.concurrency}`).join(', ')}. ` +
        'That is what Redis pays for the wake-ups, reads and replies of two round trips at that pace, before any script runs; ' +
        'the row "less the two-round-trip floor" above is what the scripts add.',
    );
  }
  if (cost.runs.length) {
    out.push('', '**Every run:**');
    out.push('');
    out.push(
      table(
        [
          'run',
          'max_concurrency',
          'req/s',
          'commands/request',
          'net of idle background',
          'Redis CPU ms/request',
          'net of idle',
          'queued',
          'commands/queued request',
          'errors',
        ],
        cost.runs.map((r) =>
          r.error
            ? [runName(r), String(r.maxConcurrency), `failed: ${r.error}`, '—', '—', '—', '—', '—', '—', '—']
            : [
                runName(r),
                r.variant === 'floor' ? '—' : String(r.maxConcurrency),
                fmtSpread(r.rps, 0),
                fmtSpread(r.commandsPerRequest, 2),
                fmtSpread(r.netCommandsPerRequest, 2),
                fmtSpread(r.cpuMsPerRequest, 4),
                fmtSpread(r.netCpuMsPerRequest, 4),
                r.queuedShare
                  ? `${fmtSpread({ ...r.queuedShare, median: r.queuedShare.median * 100, min: r.queuedShare.min * 100, max: r.queuedShare.max * 100 }, 0)}%`
                  : '—',
                r.commandsPerQueuedRequest ? fmtSpread(r.commandsPerQueuedRequest, 1) : '—',
                String(r.failures),
              ],
        ),
      ),
    );
    out.push('');
    out.push(
      "net: less the idle rate of the same replica set (liveness, sweep, health probes, Redis's own cron) over the round's seconds. " +
        'queued: requests granted by a hand-off (one PUBLISH each). commands/queued request: the pooled net cost plus the extra commands of the contended round spread over its queued requests.',
    );
    const runs = cost.runs.filter((r) => r.breakdown.length);
    const commands = [...new Set(runs.flatMap((r) => r.breakdown.map((b) => b.command)))];
    const order = (cmd: string) => -(runs[0]?.breakdown.find((b) => b.command === cmd)?.perRequest ?? 0);
    // The script calls first: `fcall` (Redis Functions), or `evalsha` where Redis has none.
    const script = (cmd: string) => (cmd === 'fcall' || cmd === 'evalsha' ? 0 : 1);
    commands.sort((a, b) => script(a) - script(b) || order(a) - order(b) || a.localeCompare(b));
    if (commands.length) {
      out.push('');
      out.push(
        table(
          ['command', ...runs.map((r) => `${runName(r)}: calls/request (µs/request)`)],
          commands.map((cmd) => [
            `\`${cmd}\``,
            ...runs.map((r) => {
              const b = r.breakdown.find((x) => x.command === cmd);
              return b ? `${b.perRequest.toFixed(3)} (${b.usecPerRequest.toFixed(2)})` : '—';
            }),
          ]),
        ),
      );
      out.push('');
      out.push(
        'Every command Redis executed in the measured windows, over all rounds, divided by the requests. `fcall` (`evalsha` on a Redis without Functions) is the scripts themselves ' +
          '(admit, release, renew, poll); the other rows are mostly the commands the scripts ran. µs as Redis accounts them: ' +
          "a script call's include its inner commands, so the column does not add up; Redis CPU above also covers reading, parsing and replying.",
      );
    }
  }
  if (cost.idle.length) {
    out.push('');
    out.push(
      table(
        [
          'idle replica set',
          'commands/s per replica',
          'by command (per replica, /s)',
          'Redis CPU ms/s (whole set + cron)',
        ],
        cost.idle.map((r) => [
          `${r.replicas} replica${r.replicas === 1 ? '' : 's'}, ${r.seconds.toFixed(1)} s`,
          r.perReplicaPerS.toFixed(1),
          r.breakdown.map((b) => `${b.command} ${b.perReplicaPerS.toFixed(1)}`).join(', '),
          r.cpuMsPerS.toFixed(2),
        ]),
      ),
    );
  }
  return out.join('\n');
}
