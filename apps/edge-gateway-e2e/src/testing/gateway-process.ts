import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitForOutput } from '@iop/dispatch/testing';
import { LOG_FLUSH_MS } from '@iop/runtime';

/** The built gateway (`nx run edge-gateway:build`); this project's `test` target depends on it. */
export const GATEWAY_MAIN = path.resolve(__dirname, '../../../../dist/apps/edge-gateway/main.js');

/** A gateway running as its own OS process, as in production. */
export interface GatewayProcess {
  url: string;
  child: ChildProcess;
  /**
   * stdout + stderr so far. A log line is written up to {@link LOG_FLUSH_MS} after it is logged
   * (README "Production layout"): wait for it with {@link GatewayProcess.waitForOutput}.
   */
  output(): string;
  /**
   * Waits until the output matches `expected` (a log line written in its batch).
   * @returns the output then
   * @throws Error with the output when it does not within `timeoutMs` (default 5000 ms)
   */
  waitForOutput(expected: RegExp | string, timeoutMs?: number): Promise<string>;
  /**
   * Waits until every line the process logged before the call is in the output: twice
   * {@link LOG_FLUSH_MS}, the longest a logged line is held. For checks that a line is absent.
   */
  settled(): Promise<void>;
  /** SIGTERM and wait for exit (graceful); resolves to the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait for exit. */
  kill(): Promise<void>;
}

/** Writes `yaml` to a fresh temp file and returns its path. */
export function writeTempConfig(yaml: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'iop-edge-')), 'edge.yaml');
  writeFileSync(file, yaml);
  return file;
}

/**
 * Starts `node dist/apps/edge-gateway/main.js serve --config FILE --listen 127.0.0.1:0` and waits
 * for its "listening on" line. `REDIS_URL` is blank unless `env` sets it: any `REDIS_URL` selects
 * the redis backend (README "Configuration"), and a test runner's own one (README "Tests") must not
 * switch a memory-backend test.
 * @throws Error with the process output when it exits or does not listen within `timeoutMs`.
 */
export async function spawnGateway(
  configFile: string,
  opts: { env?: Record<string, string>; args?: string[]; timeoutMs?: number } = {},
): Promise<GatewayProcess> {
  if (!existsSync(GATEWAY_MAIN))
    throw new Error(`${GATEWAY_MAIN} is missing: run "npx nx run edge-gateway:build" first`);
  const child = spawn(
    process.execPath,
    [GATEWAY_MAIN, 'serve', '--config', configFile, '--listen', '127.0.0.1:0', ...(opts.args ?? [])],
    {
      env: { ...process.env, LOG_LEVEL: 'warn', REDIS_URL: '', ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  // 'close', not 'exit': the lines an orderly exit writes last are read by then.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`gateway did not listen within ${opts.timeoutMs ?? 15000} ms:\n${output}`)),
      opts.timeoutMs ?? 15000,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/[^\s]+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code} before listening:\n${output}`));
    });
  });
  return {
    url,
    child,
    output: () => output,
    waitForOutput: (expected, timeoutMs) => waitForOutput(() => output, expected, timeoutMs),
    settled: () => new Promise((r) => setTimeout(r, 2 * LOG_FLUSH_MS)),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
