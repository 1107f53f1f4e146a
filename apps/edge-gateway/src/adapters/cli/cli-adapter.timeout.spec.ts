import { join } from 'node:path';
import { context, nodeScript } from '../../testing/cli-runs';
import {
  HANGS_WITH_GRANDCHILD,
  dir,
  useCliAdapterRuns,
  cliAdapter,
  ask,
  sseBody,
  readAll,
  readPids,
  expectAllGone,
} from '../../testing/cli-adapter-runs';

useCliAdapterRuns();

describe('CliAdapter', () => {
  describe('timeout_ms', () => {
    it('kills the whole process group and answers 504', async () => {
      const pidFile = join(dir, 'pids');
      const started = Date.now();
      await expect(
        cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile), 1000).chat(ask('x'), context()),
      ).rejects.toMatchObject({
        status: 504,
        code: 'upstream_timeout',
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(990);
      await expectAllGone(await readPids(pidFile));
    });

    it('makes the stream throw a 504 when it passes mid-stream', async () => {
      const pidFile = join(dir, 'pids');
      const res = await cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile, 'talk'), 1000).chat(
        ask('x', true),
        context(),
      );
      const { frames, error } = await readAll(sseBody(res));
      expect(frames).toHaveLength(1);
      expect(error).toMatchObject({ status: 504, code: 'upstream_timeout' });
      await expectAllGone(await readPids(pidFile));
    });
  });

  it("names the adapter's timeout_ms, not gateway.request_timeout_ms, when a run times out mid-stream", async () => {
    const pidFile = join(dir, 'pids');
    const res = await cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile, 'talk'), 700).chat(
      ask('x', true),
      context(),
    );
    const { error } = await readAll(sseBody(res));
    expect(error).toMatchObject({
      status: 504,
      code: 'upstream_timeout',
      message: expect.stringMatching(/timeout_ms \(700 ms, adapter "test-cli"\)/),
    });
    expect((error as Error).message).not.toContain('request_timeout_ms');
  });
});
