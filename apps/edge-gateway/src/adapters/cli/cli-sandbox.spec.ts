import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cliConfig,
  cliHost,
  context,
  contentOf,
  nodeScript,
  processesWith,
  sseText,
  waitUntil,
} from '../../testing/cli-runs';
import type { UpstreamResponse } from '../adapter';
import { CliAdapter } from './cli-adapter';
import type { CliHost } from './cli-host';
import { SURVIVOR_WAIT_MS } from './cli-process';
import { CliSandbox } from './cli-sandbox';
import { EscapedProcessSweeper } from './escaped-processes';

/**
 * Reads everything of other processes it can reach — `/proc/$PPID/environ` and `cmdline`,
 * `/proc/1/environ` and `cmdline`, every `/proc/<pid>/environ` and `cmdline` it can list — and the
 * file named in argv[1], and answers it all as JSON.
 */
const SNOOPS = `
const fs = require('node:fs');
const read = (file) => { try { return fs.readFileSync(file, 'latin1'); } catch (e) { return 'unreadable: ' + e.code; } };
const pids = fs.readdirSync('/proc').filter((e) => /^\\d+$/.test(e));
const seen = { pids, ppid: process.ppid, file: read(process.argv[1]), proc: {} };
for (const pid of new Set([String(process.ppid), '1', ...pids])) {
  seen.proc[pid] = read('/proc/' + pid + '/environ') + '\\n' + read('/proc/' + pid + '/cmdline');
}
process.stdout.write(JSON.stringify(seen));
`;

interface Seen {
  pids: string[];
  ppid: number;
  file: string;
  proc: Record<string, string>;
}

let dir = '';
let adapters: CliAdapter[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cli-sandbox-'));
});
afterEach(async () => {
  await Promise.all(adapters.map((a) => a.close()));
  adapters = [];
  rmSync(dir, { recursive: true, force: true });
});

function adapter(command: string[], host: CliHost, settings = {}): CliAdapter {
  const made = new CliAdapter(cliConfig(command, settings), host);
  adapters.push(made);
  return made;
}

/** What this test process holds that a program must not see: its initial environment (as `/proc` shows it) and its command line. */
function ownSecrets(): string[] {
  // What a program gets anyway: the base variables, and PWD (bwrap sets it to the working directory).
  const passedOn = new Set(['PATH', 'HOME', 'LANG', 'TZ', 'PWD']);
  const environ = readFileSync('/proc/self/environ', 'utf8')
    .split('\0')
    .filter((entry) => entry.length >= 8 && !passedOn.has(entry.split('=')[0]));
  return [...environ, readFileSync('/proc/self/cmdline', 'utf8')];
}

/** The program's answer, from any of the four kinds of call. */
async function answer(made: CliAdapter, kind: string): Promise<string> {
  const res: UpstreamResponse = kind.startsWith('chat')
    ? await made.chat(
        { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: kind.endsWith('stream') },
        context(),
      )
    : await made.responses({ model: 'm', input: 'x', stream: kind.endsWith('stream') }, context());
  if (res.kind === 'json' && kind.startsWith('chat')) return contentOf(res);
  if (res.kind === 'json') {
    const response = JSON.parse(String(res.body)) as { output: Array<{ content: Array<{ text: string }> }> };
    return response.output[0].content[0].text;
  }
  const text = await sseText(res);
  return [...text.matchAll(/"(?:content|delta)":"((?:[^"\\]|\\.)*)"/g)].map((m) => JSON.parse(`"${m[1]}"`)).join('');
}

describe('the bwrap sandbox (README "Security")', () => {
  it.each(['chat', 'chat stream', 'responses', 'responses stream'])(
    "%s: the program sees only its own processes, none of the gateway's environment or command line, and not the config file",
    async (kind) => {
      const config = join(dir, 'edge.yaml');
      writeFileSync(config, 'api_keys: [sk-in-the-config-file]');
      const seen = JSON.parse(
        await answer(adapter(nodeScript(SNOOPS, config), cliHost('bwrap', [config])), kind),
      ) as Seen;
      // Its own PID namespace: bwrap as PID 1, the program as 2, nothing of the host.
      expect(seen.pids.map(Number).every((pid) => pid <= 3)).toBe(true);
      expect(seen.ppid).toBe(1);
      expect(seen.file).toMatch(/^unreadable|^$/);
      const dump = JSON.stringify(seen);
      expect(dump).not.toContain('sk-in-the-config-file');
      for (const secret of ownSecrets()) expect(dump).not.toContain(JSON.stringify(secret).slice(1, -1));
    },
  );

  it('without the sandbox (cli_sandbox: none) the same program reads all of it: the test above means something', async () => {
    const config = join(dir, 'edge.yaml');
    writeFileSync(config, 'api_keys: [sk-in-the-config-file]');
    const seen = JSON.parse(
      await answer(adapter(nodeScript(SNOOPS, config), cliHost('none', [config])), 'chat'),
    ) as Seen;
    expect(seen.file).toContain('sk-in-the-config-file');
    expect(seen.proc[String(seen.ppid)]).toContain(ownSecrets()[0]);
  });

  it("the filesystem is read-only but /tmp and the program's HOME", async () => {
    const home = join(dir, 'home');
    const probe = `
const fs = require('node:fs');
const write = (file) => { try { fs.writeFileSync(file, 'x'); return 'ok'; } catch (e) { return e.code; } };
process.stdout.write(JSON.stringify([write(process.argv[1]), write(process.argv[2]), write(process.argv[3])]));
`;
    mkdirSync(home);
    // Any path off /tmp (bound whole, whatever TMPDIR says) and HOME; the checkout itself may sit under /tmp (a CI clone).
    const readOnly = process.cwd().startsWith('/tmp/') ? '/etc' : process.cwd();
    const made = adapter(
      nodeScript(probe, join(dir, 'in-tmp'), join(home, 'in-home'), join(readOnly, 'iop-edge-write-probe')),
      cliHost('bwrap'),
      {
        env: { HOME: home },
      },
    );
    expect(JSON.parse(await answer(made, 'chat'))).toEqual(['ok', 'ok', 'EROFS']);
  });

  describe('nothing the program starts outlives the run, and no sweep of /proc is needed', () => {
    /**
     * Starts two grandchildren holding no output, one in a session of its own (setsid), both with
     * `<argv[1]>:gc` in their command lines, then does argv[2].
     */
    const ESCAPES = `
const { spawn } = require('node:child_process');
const tag = process.argv[1] + ':gc';
spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', tag], { stdio: 'ignore', detached: true }).unref();
spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', tag], { stdio: 'ignore' });
if (process.argv[2] === 'exit') setTimeout(() => process.stdout.write('done', () => process.exit(0)), 300);
else { process.stdout.write('started'); setInterval(() => {}, 1000); }
`;

    it('when the program exits', async () => {
      const token = `escapee-${randomBytes(6).toString('hex')}`;
      const host = cliHost('bwrap');
      expect(await answer(adapter(nodeScript(ESCAPES, token, 'exit'), host), 'chat')).toBe('done');
      await waitUntil(() => processesWith(`${token}:gc`).length === 0, 'every process of the run is gone', 3000);
      await new Promise((r) => setTimeout(r, SURVIVOR_WAIT_MS + 100));
      expect(host.sweeper.sweeps).toBe(0);
    });

    it('when the client goes away mid-stream', async () => {
      const token = `escapee-${randomBytes(6).toString('hex')}`;
      const host = cliHost('bwrap');
      const controller = new AbortController();
      const res = await adapter(nodeScript(ESCAPES, token, 'stay'), host).chat(
        { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true },
        context(controller.signal),
      );
      if (res.kind !== 'sse') throw new Error('expected a stream');
      const frames = res.body[Symbol.asyncIterator]();
      await frames.next();
      await waitUntil(() => processesWith(`${token}:gc`).length === 2, 'both grandchildren run');
      controller.abort(new Error('client went away'));
      await frames.next().catch(() => undefined);
      await waitUntil(() => processesWith(`${token}:gc`).length === 0, 'every process of the run is gone', 3000);
      expect(host.sweeper.sweeps).toBe(0);
    });
  });

  it('answers 502 naming ENOENT when the program does not exist', async () => {
    await expect(answer(adapter([join(dir, 'no-such-llm')], cliHost('bwrap')), 'chat')).rejects.toMatchObject({
      status: 502,
      code: 'upstream_error',
      message: expect.stringContaining('"no-such-llm" could not be started (ENOENT)'),
    });
  });

  it('refuses every run, naming gateway.cli_sandbox, when bwrap does not work, and reports the check once', async () => {
    const checks: unknown[] = [];
    const sandbox = new CliSandbox('bwrap', { bwrap: join(dir, 'no-bwrap'), onCheck: (c) => checks.push(c) });
    const host = { sandbox, sweeper: new EscapedProcessSweeper('IOP_EDGE_CLI_RUN') };
    const marker = join(dir, 'ran');
    const made = adapter(nodeScript("require('node:fs').writeFileSync(process.argv[1], '')", marker), host);
    for (const kind of ['chat', 'responses stream']) {
      await expect(answer(made, kind)).rejects.toMatchObject({
        status: 502,
        message: expect.stringMatching(
          /sandbox \(gateway\.cli_sandbox: bwrap\) does not work.*gateway\.cli_sandbox: none/,
        ),
      });
    }
    expect(existsSync(marker)).toBe(false);
    expect(checks).toEqual([{ mode: 'bwrap', reason: expect.stringContaining('ENOENT') }]);
  });

  it('the check passes here (bubblewrap installed, as .ci/run and the image install it)', async () => {
    expect(await new CliSandbox('bwrap').check()).toEqual({ mode: 'bwrap' });
    expect(await new CliSandbox('none').check()).toEqual({ mode: 'none' });
  });
});
