import { parseArgs } from 'node:util';
import type { BenchOptions } from './bench-results';
import { TARGET_IDS } from './bench-targets';

/** `--help`. */
export const USAGE = `usage: npm run bench -- [flags]     (or node dist/tools/bench/main.js [flags] after a build)
  --quick               1 round × 2 s per point, 3 streams per round, 1 s warm-up (for development)
  --rounds N            interleaved rounds per point (default 3)
  --seconds S           seconds of load per point and round (default 4)
  --concurrency LIST    default 1,16,64
  --streams N           sequential streams per target and round (default 8)
  --chunk-gap-ms MS     gap between the upstream's 50 chunks (default 5)
  --open-streams N      streams held open for the RSS scenario (default 1000)
  --targets LIST        of ${TARGET_IDS.join(',')} (default all; direct is always added)
  --scenarios LIST      of throughput,streaming,relay,rss,admission,redis-cost,flow,token-estimate,redis-instructions,instructions
                        (default all but instructions); e.g. --scenarios redis-cost runs that one alone
                        (targets are launched only for throughput, streaming and relay)
  --relay-streams N     relay: streams open at once per target and round (default 400; --quick 200)
  --relay-chunks N      relay: chunks per stream (default 200; --quick 100)
  --relay-gap-ms MS     relay: gap between the upstream's chunks (default 20)
  --cost-requests N     redis-cost: pooled requests per measured round (default 2000; --quick 500)
  --cost-concurrency LIST  redis-cost: connections of the uncontended runs, one run each (default 1,16)
  --idle-seconds S      redis-cost: seconds an idle replica set is counted (default 5; --quick 2)
  --flow-seconds S      flow: length of the mixed run with clients, bands and fair share (default 60; --quick 15)
  --flow-replicas N     flow: gateway replicas (default 3)
  --flow-hold-ms MS     flow: how long the upstream holds each call (default 40)
  --redis-instr-requests N  redis-instructions: requests per callgrind window of Redis (default 2000; --quick 500)
  --instr-requests N    instructions: requests per callgrind window and in the strace window (default 2000; --quick 500)
  --instr-warmup N      instructions: uncounted requests to each fresh process first, in 10 loads (default 10000; --quick 3000)
  --instr-idle-seconds S  instructions: idle window that measures the background (default 5; --quick 2)
  --instr-connections N instructions: connections of every load (default 8)
  --profile MODE        auto (when the memory backend misses a c=1 or c=64 target) | always | never (default auto); c=64
  --out DIR             where latest.md/latest.json go (default tools/bench/results)
  --gateway-main FILE   a built gateway other than dist/apps/edge-gateway/main.js
  --upstream-main FILE  a built fake upstream other than dist/tools/fake-upstream/main.js`;

/** Every scenario, in run order. */
export const SCENARIOS = [
  'throughput',
  'streaming',
  'relay',
  'rss',
  'admission',
  'redis-cost',
  'flow',
  'token-estimate',
  'redis-instructions',
  'instructions',
] as const;

/**
 * The scenarios of a run without `--scenarios`: all but `instructions`, whose callgrind windows take
 * about half an hour on 2 cores (README "Benchmarks").
 */
export const DEFAULT_SCENARIOS: ReadonlyArray<(typeof SCENARIOS)[number]> = SCENARIOS.filter(
  (s) => s !== 'instructions',
);

/** Parsed command line: the run's options, and where files are when not in their default places. */
export interface CommandLine {
  options: BenchOptions;
  out?: string;
  gatewayMain?: string;
  upstreamMain?: string;
}

/** @throws Error naming a bad flag or value. */
export function parseCommandLine(argv: string[]): CommandLine {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      quick: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      seconds: { type: 'string' },
      concurrency: { type: 'string' },
      streams: { type: 'string' },
      'chunk-gap-ms': { type: 'string' },
      'open-streams': { type: 'string' },
      'relay-streams': { type: 'string' },
      'relay-chunks': { type: 'string' },
      'relay-gap-ms': { type: 'string' },
      'cost-requests': { type: 'string' },
      'cost-concurrency': { type: 'string' },
      'idle-seconds': { type: 'string' },
      'flow-seconds': { type: 'string' },
      'flow-replicas': { type: 'string' },
      'flow-hold-ms': { type: 'string' },
      'redis-instr-requests': { type: 'string' },
      'instr-requests': { type: 'string' },
      'instr-warmup': { type: 'string' },
      'instr-connections': { type: 'string' },
      'instr-idle-seconds': { type: 'string' },
      targets: { type: 'string' },
      scenarios: { type: 'string' },
      profile: { type: 'string', default: 'auto' },
      out: { type: 'string' },
      'gateway-main': { type: 'string' },
      'upstream-main': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const quick = values.quick ?? false;
  const int = (value: string | undefined, fallback: number, name: string, min = 1): number => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer ≥ ${min}, got ${value}`);
    return n;
  };
  const list = <T extends string>(
    value: string | undefined,
    allowed: readonly T[],
    name: string,
    fallback: readonly T[] = allowed,
  ): T[] => {
    if (value === undefined) return [...fallback];
    const items = value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const bad = items.filter((s) => !(allowed as readonly string[]).includes(s));
    if (bad.length) throw new Error(`--${name}: unknown ${bad.join(', ')}; choose from ${allowed.join(', ')}`);
    return items as T[];
  };
  const profile = values.profile;
  if (profile !== 'auto' && profile !== 'always' && profile !== 'never')
    throw new Error(`--profile must be auto, always or never, got ${profile}`);
  const targets = list(values.targets, TARGET_IDS, 'targets');
  const rounds = int(values.rounds, quick ? 1 : 3, 'rounds');
  const options: BenchOptions = {
    quick,
    rounds,
    seconds: int(values.seconds, quick ? 2 : 4, 'seconds'),
    warmupSeconds: quick ? 1 : 2,
    concurrency: values.concurrency ? values.concurrency.split(',').map((c) => int(c, 1, 'concurrency')) : [1, 16, 64],
    streamsPerRound: int(values.streams, quick ? 3 : 8, 'streams'),
    chunks: 50,
    chunkGapMs: int(values['chunk-gap-ms'], 5, 'chunk-gap-ms'),
    openStreams: int(values['open-streams'], 1000, 'open-streams'),
    // Direct is the floor every overhead is measured against.
    targets: TARGET_IDS.filter((id) => id === 'direct' || targets.includes(id)),
    scenarios: list(values.scenarios, SCENARIOS, 'scenarios', DEFAULT_SCENARIOS),
    relay: {
      streams: int(values['relay-streams'], quick ? 200 : 400, 'relay-streams'),
      chunks: int(values['relay-chunks'], quick ? 100 : 200, 'relay-chunks'),
      gapMs: int(values['relay-gap-ms'], 20, 'relay-gap-ms'),
      rounds,
    },
    profile,
    profileSeconds: quick ? 4 : 8,
    redisCost: {
      requests: int(values['cost-requests'], quick ? 500 : 2000, 'cost-requests'),
      concurrency: values['cost-concurrency']
        ? values['cost-concurrency'].split(',').map((c) => int(c, 1, 'cost-concurrency'))
        : [1, 16],
      contendedConcurrency: 64,
      contendedMaxConcurrency: 4,
      idleSeconds: int(values['idle-seconds'], quick ? 2 : 5, 'idle-seconds'),
      rounds,
      warmupRequests: quick ? 500 : 4000,
    },
    flow: {
      seconds: int(values['flow-seconds'], quick ? 15 : 60, 'flow-seconds'),
      replicas: int(values['flow-replicas'], 3, 'flow-replicas'),
      holdMs: int(values['flow-hold-ms'], 40, 'flow-hold-ms'),
    },
    redisInstructions: {
      requests: int(values['redis-instr-requests'], quick ? 500 : 2000, 'redis-instr-requests'),
      warmupRequests: quick ? 300 : 1000,
      idleSeconds: int(values['idle-seconds'], quick ? 2 : 5, 'idle-seconds'),
      rounds,
    },
    instructions: {
      requests: int(values['instr-requests'], quick ? 500 : 2000, 'instr-requests'),
      warmupRequests: int(values['instr-warmup'], quick ? 3000 : 10_000, 'instr-warmup', 0),
      warmupLoads: 10,
      idleSeconds: int(values['instr-idle-seconds'], quick ? 2 : 5, 'instr-idle-seconds'),
      connections: int(values['instr-connections'], 8, 'instr-connections'),
      rounds,
    },
  };
  return { options, out: values.out, gatewayMain: values['gateway-main'], upstreamMain: values['upstream-main'] };
}
