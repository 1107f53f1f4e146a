import { spawn } from 'node:child_process';
import { connect } from 'node:net';
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

describe('npm start (tools/start-demo.mjs): the demo upstream and the gateway as two processes', () => {
  it('serves the example through the demo upstream, prints what to curl, and SIGTERM stops both', async () => {
    if (await listening(18001)) throw new Error('127.0.0.1:18001 (the demo upstream of examples/edge.yaml) is taken by another process');
    // The gateway on a free port; the upstream on 18001, where examples/edge.yaml points.
    const child = spawn(process.execPath, ['tools/start-demo.mjs', '--listen', '127.0.0.1:0'], {
      cwd: ROOT,
      env: { ...process.env, REDIS_URL: '', LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c));
    child.stderr!.on('data', (c: Buffer) => (output += c));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
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
      expect(output).toContain('fake-upstream listening on http://127.0.0.1:18001/v1');
      expect(output).toContain(`edge-gateway listening on ${url}`);
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'llama-3.1-8b', messages: [{ role: 'user', content: 'hello' }] }),
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content).toContain('upstream=demo');
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(await listening(18001)).toBe(false);
      expect(await listening(Number(new URL(url).port))).toBe(false);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
