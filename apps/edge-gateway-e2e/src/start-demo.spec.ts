import { spawn } from 'node:child_process';
import { connect, createServer, type AddressInfo } from 'node:net';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../../..');

/** Resolves true when something accepts a TCP connection on 127.0.0.1:`port`. */
const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

/** A port nothing listens on now (the OS picks it). */
const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });

/**
 * Starts tools/start-demo.mjs in its own process group (as a terminal runs it) and resolves its gateway
 * URL. `args` and `env` are the script's (default: the gateway on a free port, the upstream on 18001).
 */
async function startDemo(args: string[] = ['--listen', '127.0.0.1:0'], env: Record<string, string> = {}) {
  if (args.length === 2 && Object.keys(env).length === 0 && (await listening(18001)))
    throw new Error('127.0.0.1:18001 (the demo upstream of examples/edge.yaml) is taken by another process');
  const child = spawn(process.execPath, ['tools/start-demo.mjs', ...args], {
    cwd: ROOT,
    env: { ...process.env, REDIS_URL: '', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c));
  child.stderr!.on('data', (c: Buffer) => (output += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const match = /try: curl -s (http:\/\/\S+)\/v1\/models\n/.exec(output);
      if (!match) return;
      clearInterval(timer);
      resolve(match[1]);
    }, 20);
    void exited.then((code) => {
      clearInterval(timer);
      reject(new Error(`start-demo exited with ${code}:\n${output}`));
    });
  });
  const stop = () => {
    // The whole group, in case the script itself is gone.
    if (child.pid !== undefined) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  return { child, url, exited, output: () => output, stop };
}

/** A chat completion on the demo's pool; `fake` holds the demo upstream's knobs (e.g. `delay_ms`). */
const chat = (url: string, fake?: Record<string, number>) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'llama-3.1-8b',
      messages: [{ role: 'user', content: 'hello' }],
      ...(fake ? { fake } : {}),
    }),
  });

describe('npm start (tools/start-demo.mjs): the demo upstream and the gateway as two processes', () => {
  it('serves the example through the demo upstream, prints what to curl, and SIGTERM stops both', async () => {
    const demo = await startDemo();
    try {
      expect(demo.output()).toContain('fake-upstream listening on http://127.0.0.1:18001/v1');
      expect(demo.output()).toContain(`edge-gateway listening on ${demo.url}`);
      const res = await chat(demo.url);
      expect(res.status).toBe(200);
      expect(
        ((await res.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content,
      ).toContain('upstream=demo');
      demo.child.kill('SIGTERM');
      expect(await demo.exited).toBe(0);
      expect(await listening(18001)).toBe(false);
      expect(await listening(Number(new URL(demo.url).port))).toBe(false);
    } finally {
      demo.stop();
    }
  });

  it('moves to the ports it is given (flags or environment) and gives every request the upstream knobs it is given', async () => {
    const [upstreamPort, gatewayPort] = [await freePort(), await freePort()];
    const demo = await startDemo(['--upstream-port', String(upstreamPort), '--upstream-knob', 'delay_ms=400'], {
      DEMO_LISTEN: `127.0.0.1:${gatewayPort}`,
    });
    try {
      expect(demo.url).toBe(`http://127.0.0.1:${gatewayPort}`);
      expect(demo.output()).toContain(`fake-upstream listening on http://127.0.0.1:${upstreamPort}/v1`);
      const sentAt = Date.now();
      const res = await chat(demo.url);
      expect(res.status).toBe(200);
      expect(Date.now() - sentAt).toBeGreaterThanOrEqual(400);
      demo.child.kill('SIGTERM');
      expect(await demo.exited).toBe(0);
    } finally {
      demo.stop();
    }
  });

  it('refuses a port that is not one, naming the flag', async () => {
    const child = spawn(process.execPath, ['tools/start-demo.mjs', '--upstream-port', '70000'], { cwd: ROOT });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c));
    expect(await new Promise((resolve) => child.once('exit', resolve))).toBe(2);
    expect(err).toContain('--upstream-port or DEMO_UPSTREAM_PORT');
  });

  it('on Ctrl-C (SIGINT to the whole process group) lets a running request finish, then stops both', async () => {
    const demo = await startDemo();
    try {
      const sentAt = Date.now();
      const running = chat(demo.url, { delay_ms: 1500 });
      await new Promise((r) => setTimeout(r, 300));
      process.kill(-demo.child.pid!, 'SIGINT');
      const res = await running;
      expect(res.status).toBe(200);
      expect(Date.now() - sentAt).toBeGreaterThanOrEqual(1500);
      expect(await demo.exited).toBe(0);
      expect(await listening(18001)).toBe(false);
      expect(await listening(Number(new URL(demo.url).port))).toBe(false);
    } finally {
      demo.stop();
    }
  });
});
