import type { AdmissionRow } from './admission-probe';
import type { TargetId } from './bench-targets';
import type { LoadPoint } from './closed-loop-load';
import type { ProfileSummary } from './cpu-profile';
import type { OpenStreamsResult } from './open-streams-probe';
import type { FlowOptions } from './flow-config';
import type { FlowResults } from './flow-judging';
import type { InstructionsOptions, InstructionsResults } from './instructions-results';
import type { RedisInstructionsOptions, RedisInstructionsResults } from './redis-instructions';
import type { RelayOptions, RelayRow } from './relay-judging';
import type { RedisCostOptions, RedisCostResults } from './redis-cost';
import type { Spread } from './stats';
import type { SCENARIOS } from './command-line';
import type { TokenEstimateResults } from './token-estimate';

/** The knobs of one benchmark run (`--quick` and the flags of `main.ts`). */
export interface BenchOptions {
  /** Interleaved rounds per point (A B C … A B C …). */
  rounds: number;
  /** Seconds of load per point and round. */
  seconds: number;
  /** Seconds of warm-up load per target before the first round. */
  warmupSeconds: number;
  concurrency: number[];
  /** Sequential streams per target and round. */
  streamsPerRound: number;
  /** Content chunks per stream (the upstream's `chunks` knob). */
  chunks: number;
  /** Gap the upstream leaves between chunks, ms (`chunk_gap_ms`). */
  chunkGapMs: number;
  /** Streams held open at once for the RSS scenario. */
  openStreams: number;
  targets: TargetId[];
  scenarios: Array<(typeof SCENARIOS)[number]>;
  /** Concurrent streams, chunks and gap of the streaming relay cost scenario. */
  relay: RelayOptions;
  /** Requests, connections and idle window of the Redis-cost scenario. */
  redisCost: RedisCostOptions;
  /** Length, replicas and call time of the flow-control scenario. */
  flow: FlowOptions;
  /** Requests, warm-up and rounds of the redis-instructions scenario. */
  redisInstructions: RedisInstructionsOptions;
  /** Requests, warm-up and connections of the instructions scenario. */
  instructions: InstructionsOptions;
  /** `auto`: profile the memory backend when its c=1 target is missed. */
  profile: 'auto' | 'always' | 'never';
  /** Seconds of load while profiling. */
  profileSeconds: number;
  quick: boolean;
}

/** Whether a target ran, or why not. */
export interface TargetStatus {
  id: TargetId;
  label: string;
  status: 'ran' | 'skipped';
  reason?: string;
  /** What was done to load it (e.g. how 3 replicas share the connections). */
  note?: string;
}

/** One target at one concurrency, over every round. */
export interface ThroughputRow {
  target: TargetId;
  label: string;
  concurrency: number;
  /** One point per round, in round order (NaN fields for a round that failed). */
  rounds: LoadPoint[];
  rps: Spread;
  /** Little's-law mean latency, ms. */
  meanMs: Spread;
  p50Ms: Spread;
  p99Ms: Spread;
  /** Mean latency minus direct's in the same round, ms (absent for direct). */
  overheadMs?: Spread;
  /** p50 minus direct's in the same round, ms. */
  p50OverheadMs?: Spread;
  /** Errors, timeouts and non-2xx answers over all rounds. */
  failures: number;
}

/** One target's streams in one round. */
export interface StreamRound {
  streams: number;
  failures: number;
  /** Median over the round's streams, ms. */
  ttfbMs: number;
  headersMs: number;
  /** Over every gap between content events of the round's streams, ms. */
  gapP50Ms: number;
  gapP99Ms: number;
  gapMaxMs: number;
  /** Gaps measured (content events after the first, over the round's streams). */
  gaps: number;
  /** Gaps shorter than a quarter of the upstream's gap: chunks that arrived together. */
  bunched: number;
  /** Fewest content events in one stream (the upstream sent `chunks`). */
  minContentEvents: number;
  /** Median body reads per stream. */
  readsPerStream: number;
  firstError?: string;
}

/** Streaming figures of one target over every round. */
export interface StreamingRow {
  target: TargetId;
  label: string;
  rounds: StreamRound[];
  ttfbMs: Spread;
  /** TTFB minus direct's in the same round, ms. */
  ttfbOverheadMs?: Spread;
  gapP50Ms: Spread;
  gapP99Ms: Spread;
  gapMaxMs: Spread;
  /** Gaps measured over every round. */
  gaps: number;
  bunched: number;
  minContentEvents: number;
  readsPerStream: Spread;
  failures: number;
}

/** Memory of one target at `openStreams` open streams (a fresh process). */
export interface RssRow {
  target: TargetId;
  label: string;
  processes: number;
  /** Resident set right after start, before any request, bytes. */
  freshRss?: number;
  result?: OpenStreamsResult;
  error?: string;
}

/** One target of the issue, checked. */
export interface TargetCheck {
  goal: string;
  /** What was measured, in words and numbers. */
  measured: string;
  /** true met, false missed, null not measured (skipped target or scenario). */
  met: boolean | null;
}

/** Everything one run produced; written as `latest.json`. */
export interface BenchResults {
  meta: {
    date: string;
    command: string;
    node: string;
    cpus: number;
    cpuModel: string;
    totalMemGiB: number;
    /** 1-minute load average at start and end: other work on the machine shows here. */
    loadAvgStart: number;
    loadAvgEnd: number;
    gitCommit: string;
    durationS: number;
  };
  options: BenchOptions;
  targets: TargetStatus[];
  throughput: ThroughputRow[];
  streaming: StreamingRow[];
  /** CPU per relayed chunk, chunk gaps and TTFB at many concurrent streams (README "Benchmarks"). */
  relay?: RelayRow[];
  rss: RssRow[];
  /** ProviderQueue admission cost in process (README "Benchmarks"). */
  admission: AdmissionRow[];
  /** Redis commands and Redis CPU per pooled request, and of an idle replica (issue "fleet mode"). */
  redisCost?: RedisCostResults;
  /** Shares and priority inversions of a mixed run with clients (README "Clients, priority and fair share"). */
  flow?: FlowResults;
  /** Scenario `token-estimate`: the token-weight estimate against real tokenizers. */
  tokenEstimate?: TokenEstimateResults;
  /** Scenario `redis-instructions`: Redis's user-space instructions per pooled request (README "Benchmarks"). */
  redisInstructions?: RedisInstructionsResults;
  /** Scenario `instructions`: user-space instructions and syscalls per request (README "Benchmarks"). */
  instructions?: InstructionsResults;
  checks: TargetCheck[];
  profile?: { reason: string; concurrency: number; seconds: number; summary?: ProfileSummary; error?: string };
}
