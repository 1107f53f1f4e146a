import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildSync } from 'esbuild';

/**
 * README "Production layout": an orderly exit (SIGTERM, a fatal error) writes every log line the
 * batching logger holds. A real process: this library's `runMain`, `createProcessLogger` and
 * `stopOnSignals`, bundled, logging two lines (held: far below a batch) on its stdout, then
 * stopped at once, well within the flush interval.
 */
const CHILD = `
import { runMain } from './run-main';
import { createProcessLogger } from './process-logger';
import { stopOnSignals } from './shutdown';

runMain('exit-test', { parse: (argv) => ({ command: argv[0] }), usage: '' }, async (cmd, toClose) => {
  const logger = createProcessLogger('exit-test', 'info');
  logger.info('held one');
  logger.info('held two');
  if (cmd.command === 'crash') setTimeout(() => { throw new Error('boom'); }, 0);
  if (cmd.command === 'rejects') throw new Error('main failed');
  if (cmd.command === 'returns') return 0;
  setInterval(() => undefined, 1000); // stands for a server: the process runs until stopped
  const stopped = stopOnSignals({ logger, toClose });
  process.stdout.write('ready\\n');
  return cmd.command === 'crash' ? new Promise<number>(() => undefined) : stopped;
});
`;

let main: string;
beforeAll(() => {
  main = path.join(mkdtempSync(path.join(tmpdir(), 'logger-exit-')), 'main.js');
  buildSync({
    stdin: { contents: CHILD, resolveDir: __dirname, loader: 'ts' },
    bundle: true,
    platform: 'node',
    packages: 'external',
    outfile: main,
    logLevel: 'silent',
  });
});

/** Runs the child with `command`; SIGTERMs it once it says `ready` when `signal`. Resolves once its pipes closed. */
function run(command: string, signal: boolean): Promise<{ code: number | null; messages: string[]; stderr: string }> {
  const child = spawn(process.execPath, [main, command], {
    env: { ...process.env, NODE_PATH: path.resolve(__dirname, '../../../node_modules') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let signalled = false;
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
    if (signal && stdout.includes('ready\n') && !signalled) signalled = child.kill('SIGTERM');
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) =>
    child.once('close', (code) =>
      resolve({
        code,
        stderr,
        messages: stdout
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => (JSON.parse(l) as { msg: string }).msg),
      }),
    ),
  );
}

describe('the held log lines at exit (a real process)', () => {
  it('SIGTERM: every held line is written, then the stop lines', async () => {
    const { code, messages } = await run('sigterm', true);
    expect(code).toBe(0);
    expect(messages).toEqual(['held one', 'held two', 'shutting down', 'stopped']);
  });

  it('main returns: process.exit writes the held lines', async () => {
    const { code, messages } = await run('returns', false);
    expect(code).toBe(0);
    expect(messages).toEqual(['held one', 'held two']);
  });

  it.each([
    ['an uncaught exception', 'crash', 'exit-test failed: Error: boom'],
    ['main rejecting', 'rejects', 'exit-test failed: Error: main failed'],
  ])('a fatal error (%s): the held lines are written before the exit 1', async (_what, command, failure) => {
    const { code, messages, stderr } = await run(command, false);
    expect(code).toBe(1);
    expect(stderr).toContain(failure);
    expect(messages).toEqual(['held one', 'held two']);
  });
});
