import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { context, nodeScript } from '../../testing/cli-runs';
import {
  HANGS_WITH_GRANDCHILD,
  dir,
  useCliAdapterRuns,
  cliAdapter,
  ask,
  sseBody,
  readPids,
  expectAllGone,
} from '../../testing/cli-adapter-runs';

useCliAdapterRuns();

describe('CliAdapter', () => {
  describe('client disconnect', () => {
    it('kills the process group at once when the signal aborts mid-stream', async () => {
      const pidFile = join(dir, 'pids');
      const controller = new AbortController();
      const res = await cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile, 'talk')).chat(
        ask('x', true),
        context(controller.signal),
      );
      const iterator = sseBody(res)[Symbol.asyncIterator]();
      expect(String((await iterator.next()).value)).toContain('started');
      const pids = await readPids(pidFile);
      const reason = new Error('client went away');
      controller.abort(reason);
      await expect(iterator.next()).rejects.toBe(reason);
      await expectAllGone(pids);
    });

    it('kills the process group when the signal aborts before any output', async () => {
      const pidFile = join(dir, 'pids');
      const controller = new AbortController();
      const answer = cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile)).chat(ask('x'), context(controller.signal));
      const pids = await readPids(pidFile);
      const reason = new Error('client went away');
      controller.abort(reason);
      await expect(answer).rejects.toBe(reason);
      await expectAllGone(pids);
    });

    it('kills the process group when the consumer stops reading the stream', async () => {
      const pidFile = join(dir, 'pids');
      const res = await cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile, 'talk')).chat(ask('x', true), context());
      for await (const frame of sseBody(res)) {
        expect(String(frame)).toContain('started');
        break;
      }
      await expectAllGone(await readPids(pidFile));
    });

    it('does not start the program when the signal is already aborted', async () => {
      const marker = join(dir, 'ran');
      const controller = new AbortController();
      controller.abort(new Error('gone'));
      await expect(
        cliAdapter(nodeScript("require('node:fs').writeFileSync(process.argv[1], '')", marker)).chat(
          ask('x'),
          context(controller.signal),
        ),
      ).rejects.toThrow('gone');
      await new Promise((r) => setTimeout(r, 200));
      expect(existsSync(marker)).toBe(false);
    });
  });
});
