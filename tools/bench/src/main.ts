/**
 * `npm run bench`: the gateway's cost per request, measured side by side on this machine (README "Benchmarks").
 *
 * Starts one fake upstream, the gateway with the memory backend (also with info logging), with
 * the Redis backend (1 and 3 replicas on a private redis-server) and Portkey's gateway, each its
 * own process on loopback; runs the scenarios (non-streaming throughput, streaming, memory at many
 * open streams, admission in process, Redis commands and CPU per request), profiles the gateway
 * when its c=1 target is missed, and writes
 * `tools/bench/results/latest.md` and `latest.json`. The markdown goes to stdout, progress to stderr.
 *
 * The npm script builds the gateway, the fake upstream and this tool first; run directly as
 * `node dist/tools/bench/main.js [--quick] [flags]` (see USAGE).
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { runAdmission } from './admission-probe';
import type { BenchOptions, BenchResults, TargetStatus } from './bench-results';
import {
  firstExisting,
  TARGET_IDS,
  TARGET_LABELS,
  TargetLauncher,
  type BenchPaths,
  type BenchTarget,
  type TargetId,
} from './bench-targets';
import { evaluateTargets, renderMarkdown } from './report';
import { runRedisCost } from './redis-cost';
import { emptyFlow } from './flow-judging';
import { runFlow } from './flow-scenario';
import { CHAT_BODY, runProfile, runRss, runStreaming, runThroughput, streamRequest, warmUp } from './scenarios';
import { ServiceSet } from './service-process';
import { probeStream } from './stream-probe';

const USAGE = `usage: npm run bench -- [flags]     (or node dist/tools/bench/main.js [flags] after a build)
  --quick               1 round × 2 s per point, 3 streams per round, 1 s warm-up (for development)
  --rounds N            interleaved rounds per point (default 3)
  --seconds S           seconds of load per point and round (default 4)
  --concurrency LIST    default 1,16,64
  --streams N           sequential streams per target and round (default 8)
  --chunk-gap-ms MS     gap between the upstream's 50 chunks (default 5)
  --open-streams N      streams held open for the RSS scenario (default 1000)
  --targets LIST        of ${TARGET_IDS.join(',')} (default all; direct is always added)
  --scenarios LIST      of throughput,streaming,rss,admission,redis-cost,flow (default all); e.g. --scenarios redis-cost runs that one alone
                        (targets are launched only for throughput and streaming)
  --cost-requests N     redis-cost: pooled requests per measured round (default 2000; --quick 500)
  --cost-concurrency LIST  redis-cost: connections of the uncontended runs, one run each (default 1,16)
  --idle-seconds S      redis-cost: seconds an idle replica set is counted (default 5; --quick 2)
  --flow-seconds S      flow: length of the mixed run with clients, bands and fair share (default 60; --quick 15)
  --flow-replicas N     flow: gateway replicas (default 3)
  --flow-hold-ms MS     flow: how long the upstream holds each call (default 40)
  --profile MODE        auto (when the memory backend misses a c=1 or c=64 target) | always | never (default auto); c=64
  --out DIR             where latest.md/latest.json go (default tools/bench/results)
  --gateway-main FILE   a built gateway other than dist/apps/edge-gateway/main.js
  --upstream-main FILE  a built fake upstream other than dist/tools/fake-upstream/main.js`;

const SCENARIOS = ['throughput', 'streaming', 'rss', 'admission', 'redis-cost', 'flow'] as const;

/** Targets whose memory is measured at many open streams (fresh processes each). */
const RSS_TARGETS: readonly TargetId[] = ['memory', 'memory-semi4', 'bullmq-1', 'portkey'];

const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

/** Parsed command line: the run's options, and where files are when not in their default places. */
interface CommandLine {
  options: BenchOptions;
  out?: string;
  gatewayMain?: string;
  upstreamMain?: string;
}

/** @throws Error naming a bad flag or value. */
function parseCommandLine(argv: string[]): CommandLine {
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
      'cost-requests': { type: 'string' },
      'cost-concurrency': { type: 'string' },
      'idle-seconds': { type: 'string' },
      'flow-seconds': { type: 'string' },
      'flow-replicas': { type: 'string' },
      'flow-hold-ms': { type: 'string' },
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
  const list = <T extends string>(value: string | undefined, allowed: readonly T[], name: string): T[] => {
    if (value === undefined) return [...allowed];
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
    scenarios: list(values.scenarios, SCENARIOS, 'scenarios'),
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
  };
  return { options, out: values.out, gatewayMain: values['gateway-main'], upstreamMain: values['upstream-main'] };
}

/** The workspace root: the nearest directory above this file with nx.json. */
function workspaceRoot(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'nx.json'))) return dir;
    if (path.dirname(dir) === dir) return process.cwd();
  }
}

function gitCommit(root: string): string {
  try {
    const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain'], { cwd: root, encoding: 'utf8' }).trim() !== '';
    return dirty ? `${sha} (with uncommitted changes)` : sha;
  } catch {
    return 'unknown';
  }
}

/**
 * One non-streaming and one streaming request through every URL of the target: a target that
 * cannot answer both is skipped with the reason, not measured.
 * @throws Error saying what failed.
 */
async function smokeTest(target: BenchTarget): Promise<void> {
  const agent = new Agent({ connections: 2 });
  try {
    for (const url of target.urls) {
      const res = await request(url, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', authorization: 'Bearer bench', ...target.headers },
        body: CHAT_BODY,
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`${url} answered ${res.statusCode}: ${text.slice(0, 200)}`);
      const parsed = JSON.parse(text) as { choices?: Array<{ message?: { content?: unknown } }> };
      if (typeof parsed.choices?.[0]?.message?.content !== 'string')
        throw new Error(`${url} answered no completion: ${text.slice(0, 200)}`);
      const stream = streamRequest(5, 0);
      const sample = await probeStream({
        url,
        headers: { ...target.headers, ...stream.headers },
        body: stream.body,
        dispatcher: agent,
      });
      if (sample.contentEvents !== 5)
        throw new Error(`${url} streamed ${sample.contentEvents} content events, the upstream sent 5`);
    }
  } finally {
    await agent.close();
  }
}

const firstLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0].slice(0, 300);

async function main(): Promise<number> {
  const startedAt = performance.now();
  const loadAvgStart = os.loadavg()[0];
  let cli: CommandLine;
  try {
    cli = parseCommandLine(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const opts = cli.options;
  const root = workspaceRoot();
  const gatewayMain =
    cli.gatewayMain ?? firstExisting(['main.js', 'main.cjs'].map((f) => path.join(root, 'dist/apps/edge-gateway', f)));
  const upstreamMain =
    cli.upstreamMain ??
    firstExisting(['main.js', 'main.cjs'].map((f) => path.join(root, 'dist/tools/fake-upstream', f)));
  const preload = firstExisting(['loopback-preload.js', 'loopback-preload.cjs'].map((f) => path.join(__dirname, f)));
  const bareProxy = firstExisting(['bare-proxy.js', 'bare-proxy.cjs'].map((f) => path.join(__dirname, f)));
  if (!gatewayMain || !upstreamMain || !preload || !bareProxy) {
    process.stderr.write(
      'build first: npx nx run-many -t build -p edge-gateway fake-upstream bench (npm run bench does)\n',
    );
    return 2;
  }
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'iop-bench-'));
  const paths: BenchPaths = {
    root,
    gatewayMain: path.resolve(gatewayMain),
    upstreamMain: path.resolve(upstreamMain),
    preload,
    bareProxy,
    workDir,
  };
  const outDir = path.resolve(cli.out ?? path.join(root, 'tools/bench/results'));
  const services = new ServiceSet();
  const interrupt = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping every process the bench started`);
    void services.stopAll().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);

  try {
    const launcher = new TargetLauncher(paths, services);
    await launcher.startUpstream();
    log(`fake upstream at ${launcher.upstreamUrl}`);

    const statuses: TargetStatus[] = [];
    const targets: BenchTarget[] = [];
    // Only throughput and streaming load the long-running targets; the other scenarios start their own processes.
    const needTargets = opts.scenarios.includes('throughput') || opts.scenarios.includes('streaming');
    for (const id of needTargets ? opts.targets : []) {
      let target: BenchTarget | undefined;
      try {
        target = await launcher.launch(id);
        await smokeTest(target);
        targets.push(target);
        statuses.push({
          id,
          label: target.label,
          status: 'ran',
          note:
            id === 'bullmq-3'
              ? 'no load balancer: autocannon spreads its connections round-robin over the 3 replica ports (connection i → replica i mod 3; ' +
                'at c=1 every request enters through replica 1, which takes and holds the lease itself), streams alternate over the replicas'
              : id === 'portkey'
                ? 'x-portkey-provider: openai, x-portkey-custom-host: the upstream; stream knobs forwarded as headers'
                : undefined,
        });
        log(`${id}: ready (${target.urls.join(', ')})`);
      } catch (err) {
        if (target) await launcher.shutdown(target);
        statuses.push({ id, label: target?.label ?? TARGET_LABELS[id], status: 'skipped', reason: firstLine(err) });
        log(`${id}: skipped: ${firstLine(err)}`);
      }
    }

    for (const target of targets) await warmUp(target, opts);

    const results: BenchResults = {
      meta: {
        date: new Date().toISOString(),
        command:
          process.env.npm_lifecycle_event === 'bench'
            ? `npm run bench${argsSuffix()}`
            : `node dist/tools/bench/main.js${argsSuffix()}`,
        node: process.versions.node,
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
        totalMemGiB: os.totalmem() / 1024 ** 3,
        loadAvgStart,
        loadAvgEnd: NaN,
        gitCommit: gitCommit(root),
        durationS: NaN,
      },
      options: { ...opts },
      targets: statuses,
      throughput: [],
      streaming: [],
      rss: [],
      admission: [],
      checks: [],
    };

    if (opts.scenarios.includes('throughput')) {
      log(`throughput: ${opts.rounds} round(s) × ${opts.seconds} s at c=${opts.concurrency.join(',')}`);
      results.throughput = await runThroughput(targets, opts, log);
    }
    if (opts.scenarios.includes('streaming')) {
      log(
        `streaming: ${opts.chunks} chunks ${opts.chunkGapMs} ms apart, ${opts.streamsPerRound} streams per target and round`,
      );
      results.streaming = await runStreaming(targets, opts, log);
    }
    for (const target of targets) await launcher.shutdown(target);
    if (opts.scenarios.includes('rss')) {
      log(`rss: ${opts.openStreams} open streams per fresh target`);
      const ran = new Set(needTargets ? targets.map((t) => t.id) : opts.targets);
      results.rss = await runRss(
        RSS_TARGETS.filter((id) => ran.has(id)),
        launcher,
        opts,
        log,
      );
    }
    if (opts.scenarios.includes('admission')) {
      log('admission: acquireLease + release in process, memory vs Redis (1 and 3 replicas)');
      results.admission = await runAdmission(
        { rounds: opts.rounds, seconds: opts.seconds, cycles: opts.quick ? 500 : 2000 },
        () => launcher.redis(),
        log,
      );
    }
    if (opts.scenarios.includes('redis-cost')) {
      const c = opts.redisCost;
      log(
        `redis-cost: own redis-server; ${c.rounds} round(s) × ${c.requests} pooled requests at c=${c.concurrency.join(',')} (1 and 3 replicas), ` +
          `idle ${c.idleSeconds} s, contended max_concurrency ${c.contendedMaxConcurrency} at c=${c.contendedConcurrency}`,
      );
      results.redisCost = await runRedisCost(launcher, c, log);
    }
    if (opts.scenarios.includes('flow')) {
      try {
        results.flow = await runFlow(launcher, opts.flow, log);
        const f = results.flow;
        log(
          `flow: ${f.grants} grants in the window; ${f.pairs.map((p) => `${p.a} ${(100 * p.aShare).toFixed(1)}% / ${p.b} ${(100 * (1 - p.aShare)).toFixed(1)}%`).join(', ')}; ` +
            `${f.inversions} inversions of ${f.judged} judged grants`,
        );
      } catch (err) {
        log(`flow: ${firstLine(err)}`);
        results.flow = emptyFlow(opts.flow, firstLine(err));
      }
    }
    results.checks = evaluateTargets(results);

    // Profiled at c=64, where the throughput target against the Node floor is measured.
    const missed = results.checks.find(
      (c) => c.met === false && /^memory backend: (overhead|throughput ≥ \d+% of the bare Node proxy)/.test(c.goal),
    );
    const wantProfile = opts.profile === 'always' || (opts.profile === 'auto' && missed !== undefined);
    if (wantProfile && targets.some((t) => t.id === 'memory')) {
      const reason =
        opts.profile === 'always'
          ? '--profile always'
          : `a memory-backend target was missed: ${missed?.goal}: ${missed?.measured}`;
      const connections = 64;
      log(`profile: ${reason}; c=${connections} for ${opts.profileSeconds} s`);
      results.profile = { reason, concurrency: connections, seconds: opts.profileSeconds };
      try {
        results.profile.summary = await runProfile(
          launcher,
          workDir,
          paths.gatewayMain,
          connections,
          opts.profileSeconds,
        );
        const profileFile = readdirSync(path.join(workDir, 'cpu-profile')).find((f) => f.endsWith('.cpuprofile'));
        mkdirSync(outDir, { recursive: true });
        if (profileFile)
          copyFileSync(path.join(workDir, 'cpu-profile', profileFile), path.join(outDir, 'latest.cpuprofile'));
      } catch (err) {
        results.profile.error = firstLine(err);
        log(`profile failed: ${firstLine(err)}`);
      }
    }

    results.meta.loadAvgEnd = os.loadavg()[0];
    results.meta.durationS = (performance.now() - startedAt) / 1000;
    const markdown = renderMarkdown(results);
    mkdirSync(outDir, { recursive: true });
    writeFileSync(path.join(outDir, 'latest.md'), markdown);
    writeFileSync(path.join(outDir, 'latest.json'), `${JSON.stringify(results, jsonNumbers, 2)}\n`);
    process.stdout.write(markdown);
    log(
      `wrote ${path.relative(process.cwd(), path.join(outDir, 'latest.md'))} and latest.json in ${results.meta.durationS.toFixed(0)} s`,
    );
    return 0;
  } finally {
    await services.stopAll();
    rmSync(workDir, { recursive: true, force: true });
  }
}

function argsSuffix(): string {
  const args = process.argv.slice(2);
  return args.length
    ? process.env.npm_lifecycle_event === 'bench'
      ? ` -- ${args.join(' ')}`
      : ` ${args.join(' ')}`
    : '';
}

/** JSON has no NaN: write not-measured numbers as null. */
function jsonNumbers(_key: string, value: unknown): unknown {
  return typeof value === 'number' && !Number.isFinite(value) ? null : value;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
