import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cliConfig, cliHost, context, contentOf, nodeScript, processesWith, waitUntil } from '../../testing/cli-runs';
import { CliAdapter } from './cli-adapter';
import { RUN_MARKER, SURVIVOR_WAIT_MS } from './cli-process';
import { EscapedProcessSweeper, type SweepResult } from './escaped-processes';

const children: ChildProcess[] = [];
let adapters: CliAdapter[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  await Promise.all(adapters.map((a) => a.close()));
  adapters = [];
});

/** A process of its own session carrying `RUN_MARKER=value` and `token` in its command line. */
function marked(value: string, token: string): void {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', token], {
    env: { PATH: process.env.PATH, [RUN_MARKER]: value },
    detached: true,
    stdio: 'ignore',
  });
  children.push(child);
}

describe('EscapedProcessSweeper (README "Adapters": what a program starts never outlives its run)', () => {
  it('one sweep serves every run that asked within the window, and kills only what carries their markers', async () => {
    const token = `marked-${randomBytes(6).toString('hex')}`;
    for (const value of ['run-a', 'run-b', 'run-c', 'other-run']) marked(value, `${token}:${value}`);
    await waitUntil(() => processesWith(token).length === 4, 'the marked processes run');
    const results: SweepResult[] = [];
    const sweeper = new EscapedProcessSweeper(RUN_MARKER, { batchMs: 200, onSweep: (r) => results.push(r) });
    for (const value of ['run-a', 'run-b', 'run-c']) sweeper.request(value);
    await sweeper.flush();
    expect(sweeper.sweeps).toBe(1);
    expect(results).toEqual([{ runs: 3, killed: 3, scanned: expect.any(Number) }]);
    await waitUntil(() => processesWith(token).length === 1, 'the three marked runs are gone');
    expect(processesWith(`${token}:other-run`)).toHaveLength(1);
  });

  it('sweeps nothing until asked', async () => {
    const sweeper = new EscapedProcessSweeper(RUN_MARKER, { batchMs: 0 });
    await sweeper.flush();
    expect(sweeper.sweeps).toBe(0);
  });

  it.each([
    [{ batchMs: -1 }, /batchMs/],
    [{ readConcurrency: 0 }, /readConcurrency/],
  ])('refuses %j', (options, message) => {
    expect(() => new EscapedProcessSweeper(RUN_MARKER, options)).toThrow(message);
  });
});

describe('a run sweeps /proc only when its group kill left a survivor (cli_sandbox: none)', () => {
  /** Starts a child in its own group, or (argv[1] = "survivor") a setsid grandchild that keeps stdout, and exits. */
  const FORKS = `
const { spawn } = require('node:child_process');
const survivor = process.argv[1] === 'survivor';
spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', process.argv[2]], {
  stdio: survivor ? ['ignore', 'inherit', 'ignore'] : 'ignore',
  detached: survivor,
}).unref();
setTimeout(() => process.stdout.write('done', () => process.exit(0)), 100);
`;

  it('20 runs whose children die with their group: no sweep at all', async () => {
    const token = `in-group-${randomBytes(6).toString('hex')}`;
    const host = cliHost('none');
    const adapter = new CliAdapter(cliConfig(nodeScript(FORKS, 'in-group', token), { max_concurrency: 10 }), host);
    adapters.push(adapter);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        adapter.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }] }, context()),
      ),
    );
    expect(answers.map(contentOf)).toEqual(Array(20).fill('done'));
    await waitUntil(() => processesWith(token).length === 0, 'every child is gone');
    await new Promise((r) => setTimeout(r, SURVIVOR_WAIT_MS + 200));
    await host.sweeper.flush();
    expect(host.sweeper.sweeps).toBe(0);
  });

  it('3 runs that each leave a survivor and end together: one sweep kills all three', async () => {
    const token = `survivor-${randomBytes(6).toString('hex')}`;
    const host = { ...cliHost('none'), sweeper: new EscapedProcessSweeper(RUN_MARKER, { batchMs: 300 }) };
    const adapter = new CliAdapter(cliConfig(nodeScript(FORKS, 'survivor', token)), host);
    adapters.push(adapter);
    await Promise.all(
      Array.from({ length: 3 }, () =>
        adapter.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }] }, context()),
      ),
    );
    await waitUntil(() => processesWith(token).length === 0, 'the three survivors are killed', 3000);
    expect(host.sweeper.sweeps).toBe(1);
  });
});
