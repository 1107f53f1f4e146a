import type { Spread } from './stats';

/** Knobs of the Redis-cost scenario (`--cost-*` flags). */
export interface RedisCostOptions {
  /** Pooled non-streamed requests per measured round. */
  requests: number;
  /**
   * Connections of the uncontended runs, one run each (the provider's limit is far above them). Redis
   * CPU per request depends on the rate: at c=1 every command is its own wake-up of Redis.
   */
  concurrency: number[];
  /** Connections of the contended runs. */
  contendedConcurrency: number;
  /** The provider's `max_concurrency` in the contended runs: most requests queue. */
  contendedMaxConcurrency: number;
  /** Seconds without traffic over which an idle replica set is counted. */
  idleSeconds: number;
  /** Measured rounds per run (after one warm-up). */
  rounds: number;
  /** Requests of the warm-up before anything is counted. */
  warmupRequests: number;
}

/** One command's share of a run, over every round. */
export interface CommandShare {
  command: string;
  /** Calls per request (background commands during the run included). */
  perRequest: number;
  /** Microseconds Redis accounted to it per request (a script call, `FCALL` or `EVALSHA`, includes its inner commands). */
  usecPerRequest: number;
}

/** One measured round of a run: a fixed number of requests between two snapshots of Redis's counters. */
export interface RedisCostRound {
  requests: number;
  ok: number;
  failures: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  /** Every command Redis executed in the window, scripts' inner commands included. */
  commands: number;
  /** Redis CPU (sys + user) in the window, ms. */
  cpuMs: number;
  /** `PUBLISH` calls: each is a grant to a request that had been queued. */
  publishes: number;
}

/**
 * A run's kind: `pooled` (nothing waits) or `contended` (most requests queue), each with flow control
 * off (no `gateway.clients`: one client) or, `-clients`, on (`BENCH_CLIENTS`: three clients in two
 * bands with weights, `max_in_flight` and `max_queued`, whose keys the requests take in turn;
 * docs/architecture.md, "Clients, priority and fair share"); `pooled-budgets`: the same clients, each
 * also with `tokens_per_minute` and `tokens_per_day` far above the load, so every request reserves
 * and reconciles its tokens and none is refused (docs/architecture.md, "Token budgets"); `floor`: no
 * gateway, the bare Node proxy making two bare round trips to Redis per request (`PING` before the
 * upstream call and after the answer, where the gateway admits and releases: `floor-proxy.ts`), one
 * connection: what two round trips cost Redis at that pace before any script runs.
 */
export type RedisCostVariant =
  'pooled' | 'contended' | 'pooled-clients' | 'contended-clients' | 'pooled-budgets' | 'floor';

/** Round trips to Redis per request of the `floor` variant: a pooled request's admit and release. */
export const FLOOR_ROUND_TRIPS = 2;

/** True for the runs where most requests queue. */
export const isContended = (v: RedisCostVariant) => v === 'contended' || v === 'contended-clients';

/** The uncontended or contended run of one replica set. */
export interface RedisCostRun {
  variant: RedisCostVariant;
  replicas: number;
  /** The provider's `max_concurrency`. */
  maxConcurrency: number;
  /** Client connections (round-robin over the replicas). */
  concurrency: number;
  rounds: RedisCostRound[];
  /** Commands / requests per round, everything Redis executed in the window. */
  commandsPerRequest: Spread;
  /** The same less the idle background (liveness, sweep, health probes) of this replica set over the round's seconds. */
  netCommandsPerRequest: Spread;
  /** Redis CPU / requests per round, ms. */
  cpuMsPerRequest: Spread;
  /** The same less the idle CPU of this replica set over the round's seconds, ms. */
  netCpuMsPerRequest: Spread;
  rps: Spread;
  /** Share of requests that queued (granted by a hand-off: one `PUBLISH` each). */
  queuedShare?: Spread;
  /**
   * Contended runs: commands per queued request, derived per round as the uncontended net cost plus
   * the extra commands of the round spread over its queued requests.
   */
  commandsPerQueuedRequest?: Spread;
  breakdown: CommandShare[];
  failures: number;
  error?: string;
}

/** A replica set with no traffic. */
export interface RedisIdleRun {
  replicas: number;
  seconds: number;
  /** Commands per second of the whole set. */
  commandsPerS: number;
  /** Commands per second per replica. */
  perReplicaPerS: number;
  /** Redis CPU while idle, ms per second (its own cron included). */
  cpuMsPerS: number;
  breakdown: Array<{ command: string; perReplicaPerS: number }>;
  error?: string;
}

/** The Redis-cost scenario, as written to `latest.json`. */
export interface RedisCostResults {
  redisVersion: string;
  /** 1-minute load average when the scenario started and ended: other work on the machine inflates Redis CPU. */
  loadAvg: [number, number];
  options: RedisCostOptions;
  idle: RedisIdleRun[];
  runs: RedisCostRun[];
  error?: string;
}
