import { startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { spawn } from 'node:child_process';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import { EXPORTER_MAIN, spawnService, writeTempConfig, type ServiceProcess } from './testing/exporter-fixtures';

/** README "Security" for the status exporter, as a process: status keys, redacted URLs, a clean exit whatever stdout. */
const STATUS_KEY = 'status-key-exporter-1';
const basic = (password: string) => `Basic ${Buffer.from(`dashboard:${password}`).toString('base64')}`;

/**
 * Starts `main args` with stdout piped, waits for its "listening on" line, then closes the reading
 * end (the log collector died), waits a moment and sends SIGTERM. Resolves to the exit code and how
 * long the exit took, or `undefined` if it had not exited after `giveUpMs` (it is then killed).
 */
async function sigtermWithBrokenStdout(
  main: string,
  args: string[],
  env: Record<string, string>,
  giveUpMs = 5000,
): Promise<{ code: number | null; ms: number } | undefined> {
  const child = spawn(process.execPath, [main, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening on" line: ${out}`)), 15_000);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (/listening on/.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  child.stdout.destroy();
  await new Promise((r) => setTimeout(r, 300));
  const sentAt = Date.now();
  child.kill('SIGTERM');
  const code = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), giveUpMs).unref())]);
  if (code === 'hung') {
    child.kill('SIGKILL');
    await exited;
    return undefined;
  }
  return { code, ms: Date.now() - sentAt };
}

describe('status exporter hardening (README "Security")', () => {
  let redis: TestRedis;
  const procs: ServiceProcess[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    for (const p of procs.splice(0)) await p.stop();
  });
  afterAll(async () => {
    await redis.stop();
  });

  const withKeys = () =>
    exporterYaml({ prefix: configPrefix('keys') }).replace('status:\n', `status:\n  api_keys: ["${STATUS_KEY}"]\n`);

  it('guards /status, /metrics and the dashboard with status.api_keys; /healthz stays open', async () => {
    const p = await spawnService(
      EXPORTER_MAIN,
      ['--config', writeTempConfig(withKeys()), '--redis', redis.url, '--listen', '127.0.0.1:0'],
      {
        env: { REDIS_URL: '' },
      },
    );
    procs.push(p);
    for (const path of ['/status', '/metrics', '/']) {
      const none = await fetch(`${p.url}${path}`);
      expect(none.status).toBe(401);
      expect(none.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
      expect(((await none.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
      expect((await fetch(`${p.url}${path}`, { headers: { authorization: 'Bearer wrong-key-1' } })).status).toBe(401);
      expect((await fetch(`${p.url}${path}`, { headers: { authorization: `Bearer ${STATUS_KEY}` } })).status).toBe(200);
      // What a browser sends once it asked for the key: the dashboard and its own fetches of /status.
      expect((await fetch(`${p.url}${path}`, { headers: { authorization: basic(STATUS_KEY) } })).status).toBe(200);
    }
    expect((await fetch(`${p.url}/healthz`)).status).toBe(200);
  });

  it('keeps the pages open without status keys', async () => {
    const p = await spawnService(
      EXPORTER_MAIN,
      [
        '--config',
        writeTempConfig(exporterYaml({ prefix: configPrefix('open') })),
        '--redis',
        redis.url,
        '--listen',
        '127.0.0.1:0',
      ],
      { env: { REDIS_URL: '' } },
    );
    procs.push(p);
    expect((await fetch(`${p.url}/status`)).status).toBe(200);
    expect((await fetch(`${p.url}/`)).status).toBe(200);
  });

  it.each([
    ['--redis with another scheme', ['--redis', 'http://:Pw-s3cret-1@127.0.0.1:6379'], {}, ['Pw-s3cret-1']],
    ['REDIS_URL with "@" in the password', [], { REDIS_URL: 'redis://:Top@Secret-2@127.0.0.1:1' }, ['Top', 'Secret-2']],
    [
      'REDIS_URL with "/" in the password',
      [],
      { REDIS_URL: 'redis://:pa/ss-word-3@127.0.0.1:1' },
      ['ss-word-3', 'pa/'],
    ],
  ])('never prints a password: %s', async (_what, args, env, secrets) => {
    const file = writeTempConfig(exporterYaml({ prefix: configPrefix('redact') }));
    const child = spawn(process.execPath, [EXPORTER_MAIN, '--config', file, '--listen', '127.0.0.1:0', ...args], {
      env: { ...process.env, LOG_LEVEL: 'info', REDIS_URL: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    // 'close', not 'exit': the lines an orderly exit writes last are read by then.
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    // Either it refuses to start, or it runs (Redis down) and logs its start-up, the Redis errors
    // included: wait for the exit or the "listening on" line, then stop it; its orderly exit writes
    // every log line it held.
    await waitUntil(
      () => child.exitCode !== null || /listening on/.test(output),
      15_000,
      'the exporter to refuse or to listen',
    );
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    expect(output).not.toBe('');
    for (const secret of secrets) expect(output).not.toContain(secret);
  });

  it('warns at start of a --redis URL with a password, steering to REDIS_URL, the password never printed', async () => {
    const file = writeTempConfig(exporterYaml({ prefix: configPrefix('cmdline') }));
    const child = spawn(
      process.execPath,
      [EXPORTER_MAIN, '--config', file, '--listen', '127.0.0.1:0', '--redis', 'redis://:Pw-cmdline-6@127.0.0.1:1'],
      { env: { ...process.env, LOG_LEVEL: 'info', REDIS_URL: '' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    // 'close', not 'exit': the lines an orderly exit writes last are read by then.
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    await waitUntil(() => output.includes('warning: --redis carries credentials'), 5000, 'the warning');
    child.kill('SIGTERM');
    await exited;
    expect(output).toContain('REDIS_URL');
    expect(output).not.toContain('Pw-cmdline-6');
  });

  it('exits 0 on SIGTERM after its stdout reader went away', async () => {
    const file = writeTempConfig(exporterYaml({ prefix: configPrefix('epipe') }));
    const result = await sigtermWithBrokenStdout(
      EXPORTER_MAIN,
      ['--config', file, '--redis', redis.url, '--listen', '127.0.0.1:0'],
      { REDIS_URL: '' },
    );
    expect(result).toBeDefined();
    expect(result!.code).toBe(0);
    expect(result!.ms).toBeLessThan(3000);
  });
});
