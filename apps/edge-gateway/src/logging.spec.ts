import { MemoryProviderQueue, queueProviders } from '@iop/dispatch';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { parseConfigText } from '@iop/validate';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { AdapterRegistry } from './adapters/adapter-registry';
import { createApp } from './app';

describe('logs at info level never contain API keys or prompts', () => {
  let upstream: FakeUpstream;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    await upstream.close();
  });

  it('writes one line per request with model, route and status, and none of the secrets', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const clientKey = 'sk-client-SECRET-1234';
    const upstreamKey = 'sk-upstream-SECRET-5678';
    const prompt = 'TOP-SECRET-PROMPT-text';
    const loaded = parseConfigText(fleetYaml({ apiKeys: [clientKey] }), {
      UPSTREAM: upstream.url,
      UPSTREAM_KEY: upstreamKey,
    });
    if (!loaded.ok) throw new Error('fixture invalid');
    const queue = new MemoryProviderQueue();
    await queue.configure(queueProviders(loaded.config));
    const adapters = new AdapterRegistry();
    const app = createApp({ config: () => loaded.config, queue, adapters, logger: pino({ level: 'info' }, sink) });
    const server = createServer(app).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const send = (model: string, key: string, extra: Record<string, unknown> = {}) =>
        fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model, messages: [{ role: 'user', content: prompt }], ...extra }),
        });
      expect((await send('llama', clientKey)).status).toBe(200);
      expect((await send('echo', clientKey)).status).toBe(200);
      expect((await send('llama', 'sk-wrong-SECRET-0000')).status).toBe(401);
      expect((await send('small', clientKey, { fake: { status: 500 } })).status).toBe(502);
      await new Promise((r) => setImmediate(r));
      const log = lines.join('');
      expect(log).toMatch(/"msg":"request"/);
      expect(log).toMatch(/"status":200,"model":"llama","route":"pool","client":"api_keys\[0\]"/);
      expect(log).toMatch(/"status":401/);
      expect(log).toMatch(/"status":502,"model":"small"/);
      for (const secret of [clientKey, upstreamKey, prompt, 'sk-wrong-SECRET-0000']) expect(log).not.toContain(secret);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await queue.close();
      await adapters.close();
    }
  });
});
