import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { context, nodeScript, waitUntil } from '../../testing/cli-runs';
import { dir, useCliAdapterRuns, cliAdapter, ask, sseBody, isGone } from '../../testing/cli-adapter-runs';

useCliAdapterRuns();

describe('CliAdapter', () => {
  describe('output size (README "Adapters": max_output_bytes)', () => {
    /** Writes argv[1] bytes of "x" in 64 KiB pieces, honouring backpressure, then exits 0 (or hangs with argv[2] = "hang"). */
    const WRITES = `
const total = Number(process.argv[1]);
const piece = 'x'.repeat(65536);
let sent = 0;
const more = () => {
  while (sent < total) {
    sent += piece.length;
    if (!process.stdout.write(piece)) return process.stdout.once('drain', more);
  }
  if (process.argv[2] === 'hang') setInterval(() => {}, 1000);
};
more();
`;

    it('answers 502 as soon as a non-streamed answer passes the cap, and kills the program', async () => {
      const pidFile = join(dir, 'pid');
      const writer = nodeScript(
        `require('node:fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));${WRITES}`,
        String(200 * 1024 * 1024),
        'hang',
      );
      const started = Date.now();
      const err = await cliAdapter(writer, 60_000, { max_output_bytes: 1024 * 1024 })
        .chat(ask('x'), context())
        .catch((e: unknown) => e);
      expect(err).toMatchObject({
        status: 502,
        code: 'upstream_error',
        message: expect.stringContaining('max_output_bytes'),
      });
      expect(Date.now() - started).toBeLessThan(5000);
      const pid = Number(readFileSync(pidFile, 'utf8'));
      await waitUntil(() => isGone(pid), 'the program is killed');
    });

    it("honours the dispatcher's cap on non-streamed answers when it is smaller", async () => {
      const ctx = { ...context(), maxResponseBytes: 100_000 };
      await expect(
        cliAdapter(nodeScript(WRITES, String(1024 * 1024)), 10_000).chat(ask('x'), ctx),
      ).rejects.toMatchObject({ status: 502 });
    });

    it('streams far more than the cap, keeping only the length for usage', async () => {
      const total = 64 * 1024 * 1024;
      const res = await cliAdapter(nodeScript(WRITES, String(total)), 60_000, { max_output_bytes: 1024 * 1024 }).chat(
        ask('x', true, { stream_options: { include_usage: true } }),
        context(),
      );
      let content = 0;
      let last = '';
      for await (const frame of sseBody(res)) {
        const text = String(frame);
        const match = /"content":"(x*)"/.exec(text);
        if (match) content += match[1].length;
        last = text;
        if (text.includes('"usage"')) expect(text).toContain(`"completion_tokens":${total / 4}`);
      }
      expect(content).toBe(total);
      expect(last).toBe('data: [DONE]\n\n');
    });
  });
});
