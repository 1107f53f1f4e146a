import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from 'openai/resources/chat/completions';
import { startLocalFleet, type LocalFleet } from '../src/local-fleet';

/** Clients at once: more than the pool's 2 + 3 slots, so requests queue on every replica. */
const WORKERS = 10;

interface FakeStats {
  total: number;
  max: number;
  aborted: number;
}

const upstreamStats = async (origin: string): Promise<FakeStats> =>
  (await fetch(`${origin}/__stats`)).json() as Promise<FakeStats>;

/**
 * README "Running a fleet": the local fleet (Redis, 3 gateways, the exporter, HAProxy) as real
 * processes. The official openai client goes through HAProxy while every replica in turn gets
 * SIGTERM, drains, exits and starts again, as in a rolling update. The client never retries
 * (maxRetries 0), so every failure the fleet lets through is counted.
 */
describe('local fleet behind HAProxy: rolling restart', () => {
  let fleet: LocalFleet;

  beforeAll(async () => {
    fleet = await startLocalFleet({ logDir: mkdtempSync(path.join(tmpdir(), 'iop-fleet-')), logLevel: 'warn' });
  }, 60_000);
  afterAll(async () => {
    await fleet?.close();
  }, 60_000);

  it('serves every request while the replicas restart one by one with SIGTERM, and the limits hold at the upstreams', async () => {
    for (const upstream of fleet.upstreams) await fetch(`${upstream.origin}/__reset`, { method: 'POST' });
    const client = new OpenAI({
      baseURL: fleet.url,
      apiKey: 'unused-without-api_keys',
      maxRetries: 0,
      timeout: 60_000,
    });
    const failures: string[] = [];
    let served = 0;
    let streamed = 0;
    let stop = false;

    const one = async (worker: number, n: number) => {
      const prompt = `worker ${worker} request ${n}`;
      const messages = [{ role: 'user' as const, content: prompt }];
      if (n % 2 === 0) {
        const body = {
          model: 'llama-3.1-8b',
          messages,
          fake: { delay_ms: 120 },
        } as ChatCompletionCreateParamsNonStreaming;
        const chat = await client.chat.completions.create(body);
        const text = chat.choices[0]?.message.content ?? '';
        if (!text.startsWith(`echo: ${prompt} `)) throw new Error(`unexpected answer ${JSON.stringify(text)}`);
      } else {
        const body = {
          model: 'llama-3.1-8b',
          messages,
          stream: true,
          fake: { chunks: 4, chunk_gap_ms: 40 },
        } as ChatCompletionCreateParamsStreaming;
        const stream = await client.chat.completions.create(body);
        let text = '';
        let finished = false;
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta?.content ?? '';
          if (chunk.choices[0]?.finish_reason === 'stop') finished = true;
        }
        if (!finished || !text.startsWith(`echo: ${prompt} `))
          throw new Error(`stream ended early: ${JSON.stringify(text)}`);
        streamed++;
      }
      served++;
    };
    const worker = async (w: number) => {
      for (let n = 0; !stop; n++) {
        await one(w, n).catch((err: Error) => failures.push(`worker ${w} request ${n}: ${err.message}`));
      }
    };
    const until = async (count: number) => {
      const deadline = Date.now() + 30_000;
      while (served < count && failures.length === 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
    };

    const workers = Array.from({ length: WORKERS }, (_, w) => worker(w));
    try {
      await until(30);
      const pids = fleet.replicas.map((r) => r.process.pid);
      for (let i = 0; i < fleet.replicas.length; i++) {
        await fleet.restartReplica(i);
        // Traffic flows between two restarts, as a rolling update waits for readiness.
        await until(served + 20);
      }
      expect(fleet.replicas.map((r) => r.process.pid)).not.toEqual(expect.arrayContaining(pids));
      await until(served + 30);
    } finally {
      stop = true;
      await Promise.all(workers);
    }

    expect(failures).toEqual([]);
    expect(served).toBeGreaterThan(150);
    expect(streamed).toBeGreaterThan(50);
    const stats = await Promise.all(fleet.upstreams.map((u) => upstreamStats(u.origin)));
    for (const [i, upstream] of fleet.upstreams.entries()) {
      // The limit held, summed over the replicas, and the load used it fully.
      const provider = upstream.providers.map((p) => p.id).join(',');
      const limit = upstream.providers.reduce((n, p) => n + p.maxConcurrency, 0);
      expect({ provider, max: stats[i].max }).toEqual({ provider, max: limit });
      expect(stats[i].aborted).toBe(0);
    }
    // Nothing ran twice: HAProxy retried only connections no gateway had taken a request from.
    expect(stats.reduce((n, s) => n + s.total, 0)).toBe(served);
    expect((await fleet.servers()).map((s) => `${s.server} ${s.status}`)).toEqual(['gw1 UP', 'gw2 UP', 'gw3 UP']);
  });
});
