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
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runAdmission } from './admission-probe';
import type { BenchResults, TargetStatus } from './bench-results';
import { firstExisting } from './target-files';
import {
  FLOOR_DESIGN_NOTE,
  TARGET_LABELS,
  TargetLauncher,
  type BenchPaths,
  type BenchTarget,
  type TargetId,
} from './bench-targets';
import { evaluateTargets, renderMarkdown } from './report';
import { runRedisCost } from './redis-cost';
import { runRelay } from './relay-cost';
import { emptyFlow } from './flow-judging';
import { runFlow } from './flow-scenario';
import { runInstructions } from './instructions-scenario';
import { runRedisInstructions } from './redis-instructions';
import { runTokenEstimate } from './token-estimate';
import { smokeTest } from './smoke-test';
import { parseCommandLine, USAGE, type CommandLine } from './command-line';
import { runProfile, runRss, runStreaming, runThroughput, warmUp } from './scenarios';
import { ServiceSet } from './service-process';
import { argsSuffix, gitCommit, jsonNumbers, workspaceRoot } from './run-meta';

/** Targets whose memory is measured at many open streams (fresh processes each). */
const RSS_TARGETS: readonly TargetId[] = ['memory', 'memory-semi4', 'bullmq-1', 'portkey'];

const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

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
  const bundle = (name: string) => firstExisting(['.js', '.cjs'].map((ext) => path.join(__dirname, name + ext)));
  const [preload, bareProxy, expressFloor] = ['loopback-preload', 'bare-proxy', 'express-floor'].map(bundle);
  if (!gatewayMain || !upstreamMain || !preload || !bareProxy || !expressFloor) {
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
    expressFloor,
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
    // Only throughput, streaming and relay load the long-running targets; the other scenarios start their own processes.
    const needTargets = ['throughput', 'streaming', 'relay'].some((s) => opts.scenarios.includes(s as 'relay'));
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
              : id === 'node-floor'
                ? FLOOR_DESIGN_NOTE
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
    if (opts.scenarios.includes('relay')) {
      const r = opts.relay;
      log(
        `relay: ${r.streams} streams at once × ${r.chunks} chunks ${r.gapMs} ms apart (${Math.round((r.streams * 1000) / r.gapMs)} chunks/s), ${r.rounds} round(s)`,
      );
      results.relay = await runRelay(targets, r, log);
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
    if (opts.scenarios.includes('token-estimate')) {
      try {
        results.tokenEstimate = runTokenEstimate(root, log);
      } catch (err) {
        log(`token-estimate: ${firstLine(err)}`);
      }
    }
    if (opts.scenarios.includes('redis-instructions')) {
      const o = opts.redisInstructions;
      log(
        `redis-instructions: redis-server under callgrind; per variant ${o.warmupRequests} warm-up requests, ` +
          `${o.rounds} window(s) of ${o.requests} sequential pooled requests`,
      );
      results.redisInstructions = await runRedisInstructions(launcher, o, workDir, log);
    }
    if (opts.scenarios.includes('instructions')) {
      const o = opts.instructions;
      log(
        `instructions: per target a process under callgrind (${o.warmupRequests} warm-up requests, ${o.rounds} window(s) of ${o.requests} at c=${o.connections}), ` +
          'then one under strace',
      );
      results.instructions = await runInstructions(launcher, opts.targets, o, workDir, log);
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

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
