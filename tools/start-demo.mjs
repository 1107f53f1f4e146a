#!/usr/bin/env node
// `npm start`: the demo of README "Try it", as two processes. The fake upstream
// (dist/tools/fake-upstream/main.js, a test tool that never ships in the gateway's bundle) listens
// on 127.0.0.1:18001, where examples/edge.yaml points its providers; then the gateway
// (dist/apps/edge-gateway/main.js) serves examples/edge.yaml. Both must be built first
// (`nx run-many -t build -p edge-gateway fake-upstream`, which `npm start` does).
//
// Ctrl-C or SIGTERM stops both (the gateway drains first, the upstream serves until it has) and
// exits with the gateway's code; if
// either process exits on its own, the other is stopped and the script exits 1.
// Ports (README "Try it"): `--upstream-port N` (or DEMO_UPSTREAM_PORT; default 18001) moves the demo
// upstream, and the gateway then serves a copy of examples/edge.yaml pointed at it (in the OS temp
// dir); `--listen HOST:PORT` (or DEMO_LISTEN) moves the gateway. `--upstream-knob name=value`
// (repeatable) gives every demo request a knob of the fake upstream (e.g. delay_ms=2000, so queues
// form). Every other argument goes to the gateway (e.g. `npm start -- --redis redis://127.0.0.1:6379`).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const UPSTREAM_MAIN = path.join(root, 'dist/tools/fake-upstream/main.js');
const GATEWAY_MAIN = path.join(root, 'dist/apps/edge-gateway/main.js');
/** Where examples/edge.yaml expects its upstream. */
const EXAMPLE_UPSTREAM_PORT = '18001';
const EXAMPLE_CONFIG = 'examples/edge.yaml';

/**
 * This script's own flags, taken out of `argv`; the rest goes to the gateway. Exits 2 with a
 * message for a flag without its value or a port that is not 1-65535.
 */
function demoArgs(argv, env) {
  const gateway = [];
  const knobs = [];
  let upstreamPort = env.DEMO_UPSTREAM_PORT || EXAMPLE_UPSTREAM_PORT;
  let listen = env.DEMO_LISTEN || undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [flag, inline] =
      arg.startsWith('--') && arg.includes('=')
        ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]
        : [arg, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined) fail(`${flag} needs a value`);
      return v;
    };
    if (flag === '--upstream-port') upstreamPort = value();
    else if (flag === '--upstream-knob') knobs.push(value());
    else if (flag === '--listen') listen = value();
    else gateway.push(arg);
  }
  const port = Number(upstreamPort);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    fail(
      `the demo upstream's port must be a whole number 1-65535 (--upstream-port or DEMO_UPSTREAM_PORT), got "${upstreamPort}"`,
    );
  return { upstreamPort: String(port), knobs, listen, gateway };
}

function fail(message) {
  process.stderr.write(`start-demo: ${message}\n`);
  process.exit(2);
}

/** examples/edge.yaml, or a copy of it pointed at the demo upstream on `port` (in the OS temp dir). */
function demoConfig(port) {
  if (port === EXAMPLE_UPSTREAM_PORT) return EXAMPLE_CONFIG;
  const text = readFileSync(path.join(root, EXAMPLE_CONFIG), 'utf8').replaceAll(
    `127.0.0.1:${EXAMPLE_UPSTREAM_PORT}`,
    `127.0.0.1:${port}`,
  );
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'iop-edge-demo-')), 'edge.yaml');
  writeFileSync(file, text);
  return file;
}

const args = demoArgs(process.argv.slice(2), process.env);

for (const file of [UPSTREAM_MAIN, GATEWAY_MAIN]) {
  if (!existsSync(file)) {
    process.stderr.write(
      `start-demo: ${path.relative(root, file)} is missing: run "npx nx run-many -t build -p edge-gateway fake-upstream" (npm start does)\n`,
    );
    process.exit(1);
  }
}

/** The children still running, by name. */
const running = new Map();
let stopping = false;
let exitCode = 0;

/**
 * Starts `node args…` with stderr inherited and stdout copied to ours; resolves with the process
 * once a stdout line matches `ready`, rejects if it exits first.
 */
function start(name, args, ready) {
  // Each child in its own process group: a terminal's Ctrl-C reaches this script alone, which stops
  // the gateway first (it drains its requests) and the upstream after, not all three at once.
  const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], detached: true });
  running.set(name, child);
  return new Promise((resolve, reject) => {
    let seen = '';
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk);
      if (seen !== undefined) {
        seen += chunk;
        const match = ready.exec(seen);
        if (match) {
          seen = undefined;
          resolve(match);
        }
      }
    });
    child.once('exit', (code, signal) => {
      running.delete(name);
      reject(new Error(`${name} exited (${signal ?? code}) before it was ready`));
      if (!stopping) {
        process.stderr.write(`start-demo: ${name} exited (${signal ?? code}); stopping the rest\n`);
        void stopAll(1);
      } else if (name === 'edge-gateway' && code !== 0) {
        exitCode = code ?? 1;
      }
    });
  });
}

/** Stops the gateway (it drains), then the upstream, with SIGTERM; exits once both are gone. */
async function stopAll(code) {
  if (stopping) return;
  stopping = true;
  exitCode = code;
  for (const name of ['edge-gateway', 'fake-upstream']) {
    const child = running.get(name);
    if (!child) continue;
    const gone = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await gone;
  }
  process.exit(exitCode);
}

process.on('SIGINT', () => void stopAll(0));
// However this script ends, no child outlives it.
process.on('exit', () => {
  for (const child of running.values()) child.kill('SIGTERM');
});
process.on('SIGTERM', () => void stopAll(0));

try {
  await start(
    'fake-upstream',
    [
      UPSTREAM_MAIN,
      '--host',
      '127.0.0.1',
      '--port',
      args.upstreamPort,
      '--name',
      'demo',
      ...args.knobs.flatMap((k) => ['--knob', k]),
    ],
    /listening on (\S+)/,
  );
  const [, url] = await start(
    'edge-gateway',
    [
      '--max-semi-space-size=4',
      GATEWAY_MAIN,
      'serve',
      '--config',
      demoConfig(args.upstreamPort),
      ...(args.listen ? ['--listen', args.listen] : []),
      ...args.gateway,
    ],
    /edge-gateway listening on (\S+)/,
  );
  process.stdout.write(
    [
      '',
      `try: curl -s ${url}/v1/models`,
      `     curl -s ${url}/v1/chat/completions -H 'content-type: application/json' -d '{"model":"llama-3.1-8b","messages":[{"role":"user","content":"hello"}]}'`,
      'Ctrl-C stops the gateway and the demo upstream.',
      '',
    ].join('\n'),
  );
} catch (err) {
  if (!stopping) {
    process.stderr.write(`start-demo: ${err.message}\n`);
    await stopAll(1);
  }
}
