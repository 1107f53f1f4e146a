import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitForOutput } from '@iop/dispatch/testing';

/** The built gateway (`nx run edge-gateway:build`); this project's `test` target depends on it. */
export const GATEWAY_MAIN = path.resolve(__dirname, '../../../../dist/apps/edge-gateway/main.js');

/** The built exporter (`nx run status-exporter:build`); this project's `test` target depends on it. */
export const EXPORTER_MAIN = path.resolve(__dirname, '../../../../dist/apps/status-exporter/main.js');

/** Writes `yaml` to a fresh temp file and returns its path. */
export function writeTempConfig(yaml: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'iop-exporter-')), 'edge.yaml');
  writeFileSync(file, yaml);
  return file;
}

/** A Node service running as its own OS process (the built exporter or gateway). */
export interface ServiceProcess {
  /** The URL from its "listening on" line, or undefined when it exited first. */
  url?: string;
  child: ChildProcess;
  /**
   * stdout + stderr so far. A log line is written up to 250 ms (the logger's flush interval) after
   * it is logged (README "Production layout"): wait for it with {@link ServiceProcess.waitForOutput}.
   */
  output(): string;
  /**
   * Waits until the output contains `expected` (a log line written in its batch).
   * @throws Error with the output when it does not within `timeoutMs` (default 5000 ms)
   */
  waitForOutput(expected: RegExp | string, timeoutMs?: number): Promise<void>;
  /** Resolves to the exit code once the process exited. */
  exited: Promise<number | null>;
  /** SIGTERM and wait; resolves to the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Runs `node <main> ...args` and waits for its "listening on URL" line, or for its exit (then
 * `url` is undefined: for tests of refusals).
 * @throws Error with the output when it neither listens nor exits within `timeoutMs`.
 */
export async function spawnService(
  main: string,
  args: string[],
  opts: { env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<ServiceProcess> {
  if (!existsSync(main)) throw new Error(`${main} is missing: build it first (npx nx run-many -t build)`);
  const child = spawn(process.execPath, [main, ...args], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  // 'close', not 'exit': the lines an orderly exit writes last are read by then.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const url = await new Promise<string | undefined>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new Error(
            `${path.basename(path.dirname(main))} did not listen within ${opts.timeoutMs ?? 15000} ms:\n${output}`,
          ),
        ),
      opts.timeoutMs ?? 15000,
    );
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    void exited.then(() => {
      clearTimeout(timer);
      resolve(undefined);
    });
  });
  return {
    url,
    child,
    output: () => output,
    waitForOutput: async (expected, timeoutMs) => void (await waitForOutput(() => output, expected, timeoutMs)),
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}
