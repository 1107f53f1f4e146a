import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliConfig, cliHost, context, jsonBody, nodeScript, waitUntil } from '../../testing/cli-runs';
import {
  adapters,
  dir,
  useCliAdapterRuns,
  cliAdapter,
  ask,
  sseBody,
  isGone,
  readPids,
} from '../../testing/cli-adapter-runs';
import { CliAdapter } from './cli-adapter';
import { RUN_MARKER } from './cli-process';
import { EscapedProcessSweeper } from './escaped-processes';

useCliAdapterRuns();

describe('CliAdapter', () => {
  describe('a grandchild that left the process group with setsid and holds its output (README "Adapters")', () => {
    /**
     * Starts a grandchild in a session of its own (detached = setsid) that keeps the run's stdout,
     * writes [own pid, grandchild pid] to argv[1], then does argv[2]. Without a sandbox only such a
     * survivor (output still held after the exit) is swept for; in the sandbox none survives at all.
     */
    const ESCAPES = `
const { spawn } = require('node:child_process');
const grandchild = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: ['ignore', 'inherit', 'ignore'], detached: true });
grandchild.unref();
require('node:fs').writeFileSync(process.argv[1], JSON.stringify([process.pid, grandchild.pid]));
if (process.argv[2] === 'exit') process.stdout.write('done', () => process.exit(0));
else { process.stdout.write('started'); setInterval(() => {}, 1000); }
`;
    const sessionOf = (pid: number) => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
    };

    it('is killed when the program exits normally', async () => {
      const pidFile = join(dir, 'pids');
      const body = jsonBody(await cliAdapter(nodeScript(ESCAPES, pidFile, 'exit')).chat(ask('x'), context()));
      expect(body).toMatchObject({ choices: [{ message: { content: 'done' } }] });
      const [program, grandchild] = await readPids(pidFile);
      expect(program).not.toBe(grandchild);
      await waitUntil(() => isGone(grandchild), `the setsid grandchild ${grandchild} is killed`, 3000);
    });

    it('is found by one sweep, after the program exited, and the answer does not wait for the sweep', async () => {
      const pidFile = join(dir, 'pids');
      // A sweep that waits 60 s for company: the answer must come long before it.
      const host = { ...cliHost('none'), sweeper: new EscapedProcessSweeper(RUN_MARKER, { batchMs: 60_000 }) };
      const adapter = new CliAdapter(cliConfig(nodeScript(ESCAPES, pidFile, 'exit')), host);
      adapters.push(adapter);
      const body = jsonBody(await adapter.chat(ask('x'), context()));
      expect(body).toMatchObject({ choices: [{ message: { content: 'done' } }] });
      expect(host.sweeper.sweeps).toBe(0);
      const [, grandchild] = await readPids(pidFile);
      expect(isGone(grandchild)).toBe(false);
      await host.sweeper.flush();
      await waitUntil(() => isGone(grandchild), `the setsid grandchild ${grandchild} is killed`, 3000);
      expect(host.sweeper.sweeps).toBe(1);
    });

    it('is killed when the client goes away', async () => {
      const pidFile = join(dir, 'pids');
      const controller = new AbortController();
      const res = await cliAdapter(nodeScript(ESCAPES, pidFile, 'stay')).chat(
        ask('x', true),
        context(controller.signal),
      );
      const iterator = sseBody(res)[Symbol.asyncIterator]();
      await iterator.next();
      const [program, grandchild] = await readPids(pidFile);
      expect(sessionOf(grandchild)).toBe(grandchild); // it really left: a session (and group) of its own
      controller.abort(new Error('client went away'));
      await iterator.next().catch(() => undefined);
      await waitUntil(() => isGone(program) && isGone(grandchild), 'both are killed', 3000);
    });
  });
});
