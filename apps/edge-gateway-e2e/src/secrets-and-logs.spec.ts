import { spawn, spawnSync } from 'node:child_process';
import { fleetYaml } from '@iop/fake-upstream';
import { GATEWAY_MAIN, spawnGateway, writeTempConfig } from './testing/gateway-process';

/**
 * README "Security" on the gateway process: credentials in Redis URLs never printed, API keys that
 * could never match refused by `validate`, client strings truncated in the access log, and an exit
 * on SIGTERM whatever became of stdout.
 */
const env = { UPSTREAM: 'http://127.0.0.1:9/v1', UPSTREAM_KEY: 'k' };

/**
 * Runs the gateway with `args`/`extraEnv` until it exits, or until it says it listens (then SIGTERM,
 * which its handlers, in place by then, turn into a clean exit); at most 15 s. Resolves to its exit
 * code and output.
 */
async function runBriefly(
  args: string[],
  extraEnv: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [GATEWAY_MAIN, ...args], {
    env: { ...process.env, LOG_LEVEL: 'info', REDIS_URL: '', ...env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  // 'close', not 'exit': the lines an orderly exit writes last are read by then.
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  const deadline = Date.now() + 15_000;
  while (child.exitCode === null && child.signalCode === null && !/listening on/.test(output)) {
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  if (child.exitCode === null) child.kill('SIGTERM');
  return { code: await exited, output };
}

describe('credentials in Redis URLs are never printed', () => {
  const file = writeTempConfig(fleetYaml());
  it.each([
    [
      '--redis with another scheme (refused, exit 2)',
      ['--redis', 'http://:Pw-s3cret-1@127.0.0.1:6379'],
      {},
      ['Pw-s3cret-1'],
      2,
    ],
    [
      'REDIS_URL with "@" in the password (runs, Redis down)',
      [],
      { REDIS_URL: 'redis://:Top@Secret-2@127.0.0.1:1' },
      ['Top', 'Secret-2'],
      0,
    ],
    [
      'REDIS_URL with "/" in the password (refused, exit 2)',
      [],
      { REDIS_URL: 'redis://:pa/ss-word-3@127.0.0.1:1' },
      ['ss-word-3', 'pa/'],
      2,
    ],
    [
      '--redis whose "/" makes the userinfo read as a path (runs, host "us")',
      ['--redis', 'redis://us/er:12/ss-4@127.0.0.1:1'],
      {},
      ['ss-4', 'er:12'],
      0,
    ],
  ] as const)('%s', async (_what, args, extraEnv, secrets, code) => {
    const run = await runBriefly(['serve', '--config', file, '--listen', '127.0.0.1:0', ...args], extraEnv);
    expect(run.code).toBe(code);
    expect(run.output).toMatch(/\*\*\*/);
    for (const secret of secrets) expect(run.output).not.toContain(secret);
  });
});

describe('a password on the command line is warned of (README "Security")', () => {
  const file = writeTempConfig(fleetYaml());
  it('--redis with a password: a warning at start that steers to REDIS_URL, the password never printed', async () => {
    const run = await runBriefly(
      ['serve', '--config', file, '--listen', '127.0.0.1:0', '--redis', 'redis://:Pw-cmdline-5@127.0.0.1:1'],
      {},
    );
    expect(run.code).toBe(0);
    expect(run.output).toContain('warning: --redis carries credentials');
    expect(run.output).toContain('REDIS_URL');
    expect(run.output).not.toContain('Pw-cmdline-5');
  });

  it('the same URL in REDIS_URL: no warning', async () => {
    const run = await runBriefly(['serve', '--config', file, '--listen', '127.0.0.1:0'], {
      REDIS_URL: 'redis://:Pw-cmdline-5@127.0.0.1:1',
    });
    expect(run.output).not.toContain('warning: --redis');
    expect(run.output).not.toContain('Pw-cmdline-5');
  });

  it('--help steers a password to REDIS_URL', () => {
    const help = spawnSync(process.execPath, [GATEWAY_MAIN, '--help'], { encoding: 'utf8' });
    expect(help.stdout).toMatch(/--redis URL[\s\S]*readable by[\s\S]*every local user[\s\S]*REDIS_URL/);
  });
});

describe('validate refuses API keys that could never match', () => {
  it.each([
    ['a non-ASCII key', 'clé-1234'],
    ['a key with a trailing space', 'sk-key-1234 '],
  ])('%s: exit 1, path and reason, the key never printed', (_what, key) => {
    const yaml = fleetYaml({ apiKeys: [key] });
    const run = spawnSync(process.execPath, [GATEWAY_MAIN, 'validate', writeTempConfig(yaml)], {
      encoding: 'utf8',
      env: { ...process.env, ...env },
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/gateway\.api_keys\[0\].*printable ASCII without spaces/);
    expect(run.stderr).not.toContain(key.trim());
  });
});

describe('the access log truncates client strings', () => {
  it('logs a 100 KB model name and path as their first 256 characters and a count', async () => {
    const gateway = await spawnGateway(writeTempConfig(fleetYaml()), { env: { ...env, LOG_LEVEL: 'info' } });
    try {
      const model = 'm'.repeat(100_000);
      const res = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(res.status).toBe(404);
      await res.text();
      const deadline = Date.now() + 3000;
      while (!/"msg":"request"/.test(gateway.output()) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      const line = gateway
        .output()
        .split('\n')
        .find((l) => l.includes('"msg":"request"'));
      expect(line).toBeDefined();
      expect(line!.length).toBeLessThan(2000);
      expect(JSON.parse(line!).model).toBe(`${'m'.repeat(256)}…(${100_000 - 256} more characters)`);
    } finally {
      await gateway.stop();
    }
  });
});

describe('SIGTERM with a broken stdout', () => {
  it('exits 0 after its stdout reader went away', async () => {
    const child = spawn(
      process.execPath,
      [GATEWAY_MAIN, 'serve', '--config', writeTempConfig(fleetYaml()), '--listen', '127.0.0.1:0'],
      {
        env: { ...process.env, LOG_LEVEL: 'info', REDIS_URL: '', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    let out = '';
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (d: Buffer) => ((out += d.toString()), /listening on/.test(out) && resolve())),
    );
    child.stdout.destroy();
    await new Promise((r) => setTimeout(r, 300));
    child.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 5000).unref())]);
    if (code === 'hung') child.kill('SIGKILL');
    expect(code).toBe(0);
  });
});
