import { waitUntil } from '@iop/dispatch/testing';
import { mkdtempSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startLocalFleet, type LocalFleet } from '../src/local-fleet';

interface FakeStats {
  total: number;
}
const upstreamTotal = async (fleet: LocalFleet) => {
  let total = 0;
  for (const u of fleet.upstreams) total += ((await (await fetch(`${u.origin}/__stats`)).json()) as FakeStats).total;
  return total;
};

/**
 * One chat completion through HAProxy, on a fresh connection or (`keepAlive`) on one the client
 * keeps and reuses, as HTTP clients do by default; the body parsed when it is JSON.
 */
async function chat(fleet: LocalFleet, model: string, fake: Record<string, number> = {}, keepAlive = false) {
  const res = await fetch(`${fleet.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(keepAlive ? {} : { connection: 'close' }) },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'fault' }], fake }),
  });
  const text = await res.text();
  let body: { error?: { code: string; type: string } } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, text, body };
}

/** A chat completion through HAProxy with node:http on `agent` (keep-alive sockets reused as the agent decides). */
function postChat(
  fleet: LocalFleet,
  agent: Agent,
  fake: Record<string, number>,
): Promise<{ status: number; text: string }> {
  const body = JSON.stringify({ model: 'llama-3.1-8b', messages: [{ role: 'user', content: 'fault' }], fake });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${fleet.url}/chat/completions`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const gaugeValue = async (url: string, name: string) =>
  new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, 'm').exec(await (await fetch(`${url}/metrics`)).text())?.slice(1);

/**
 * The local fleet (README "Running a fleet") under real faults: Redis paused, a replica killed
 * with SIGKILL under load, a rolling restart with a replica down. Real processes: Redis, 3
 * gateways, the exporter, HAProxy on deploy/haproxy/haproxy.cfg.
 */
describe('local fleet behind HAProxy under real faults', () => {
  let fleet: LocalFleet;
  const lines: string[] = [];

  beforeAll(async () => {
    fleet = await startLocalFleet({
      logDir: mkdtempSync(path.join(tmpdir(), 'iop-fleet-faults-')),
      logLevel: 'warn',
      log: (line) => lines.push(line),
    });
  }, 60_000);
  afterAll(async () => {
    await fleet?.close();
  }, 60_000);

  const statuses = async () => (await fleet.servers()).map((s) => `${s.server} ${s.status}`);

  it('every replica and the exporter run the same config: one iop_edge_config_info hash', async () => {
    const hashes = await Promise.all(
      [...fleet.replicas.map((r) => `http://127.0.0.1:${r.port}`), fleet.exporterUrl].map((url) =>
        gaugeValue(url, 'iop_edge_config_info'),
      ),
    );
    expect(new Set(hashes.map((h) => h?.[0])).size).toBe(1);
    expect(hashes[0]).toEqual([expect.stringMatching(/^\{hash="[0-9a-f]{12}"\}$/), '1']);
  });

  it('Redis paused: no replica leaves HAProxy; pooled requests get the JSON 503 queue_unavailable with Retry-After, direct ones are served; all recovers when Redis resumes', async () => {
    const pid = fleet.redis?.pid;
    if (pid === undefined) throw new Error('this test needs the fleet to run its own Redis');
    expect((await chat(fleet, 'llama-3.1-8b')).status).toBe(200);
    process.kill(pid, 'SIGSTOP');
    try {
      // Longer than HAProxy needs to take a failing replica out (fall 2 × inter 1 s) and then some.
      const until = Date.now() + 4000;
      const pooled: Awaited<ReturnType<typeof chat>>[] = [];
      const direct: number[] = [];
      while (Date.now() < until) {
        expect(await statuses()).toEqual(['gw1 UP', 'gw2 UP', 'gw3 UP']);
        pooled.push(await chat(fleet, 'llama-3.1-8b'));
        direct.push((await chat(fleet, 'echo')).status);
      }
      expect(pooled.length).toBeGreaterThan(2);
      for (const res of pooled) {
        expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status: 503, code: 'queue_unavailable' });
        expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
        // Answered by a gateway (every gateway answer carries its request id), not by HAProxy.
        expect(res.headers.get('x-request-id')).toBeTruthy();
      }
      expect(new Set(direct)).toEqual(new Set([200]));
      expect(
        await Promise.all(
          fleet.replicas.map((r) => gaugeValue(`http://127.0.0.1:${r.port}`, 'iop_edge_queue_reachable')),
        ),
      ).toEqual(fleet.replicas.map(() => ['{backend="redis"}', '0']));
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    // Each replica serves pooled requests again once its next renewal round reaches Redis (≤ 1 s).
    for (const r of fleet.replicas)
      await waitUntil(
        async () => (await chat({ ...fleet, url: `http://127.0.0.1:${r.port}/v1` }, 'llama-3.1-8b')).status === 200,
        20_000,
        `pooled requests to recover on ${r.name}`,
      );
    expect(await statuses()).toEqual(['gw1 UP', 'gw2 UP', 'gw3 UP']);
  });

  it.each([
    ['fresh connections', false],
    ['keep-alive connections the clients reuse', true],
  ])(
    'SIGKILL of a replica under load (%s): no request reaches an upstream twice; each one lost is a JSON 502; the crashed replica is restarted and back in HAProxy',
    async (_how, keepAlive) => {
      for (const u of fleet.upstreams) await fetch(`${u.origin}/__reset`, { method: 'POST' });
      const victim = fleet.replicas[1];
      const oldPid = victim.process.pid;
      let attempts = 0;
      let served = 0;
      const failures: string[] = [];
      let stop = false;
      const worker = async () => {
        while (!stop) {
          attempts++;
          // A connection closed without an answer is a failure too: the client cannot know whether to re-send.
          const res = await chat(fleet, 'llama-3.1-8b', { delay_ms: 400 }, keepAlive).catch((err: Error) => ({
            status: 0,
            body: undefined,
            text: `no answer: ${String((err.cause as Error | undefined)?.message ?? err.message)}`,
          }));
          if (res.status === 200) served++;
          else failures.push(`${res.status} ${res.body?.error?.code ?? res.text.slice(0, 80)}`);
        }
      };
      const workers = Array.from({ length: 10 }, () => worker());
      try {
        // Kill it while it holds requests: the ones in flight there may have reached an upstream.
        await waitUntil(
          async () => ((await fleet.servers()).find((s) => s.server === victim.name)?.sessions ?? 0) >= 2,
          15_000,
          `${victim.name} to hold requests`,
        );
        const restarts = () => lines.filter((l) => l.includes(`${victim.name} restarted`)).length;
        const before = restarts();
        process.kill(oldPid ?? 0, 'SIGKILL');
        await waitUntil(() => restarts() > before, 15_000, 'the restart');
        await fleet.waitForServer(victim.name, (s) => s === 'UP');
        const after = served;
        await waitUntil(() => served >= after + 20, 30_000, 'traffic after the restart');
      } finally {
        stop = true;
        await Promise.all(workers);
      }
      // Never twice: each request reached an upstream at most once, retries included.
      expect(await upstreamTotal(fleet)).toBeLessThanOrEqual(attempts);
      // What a crash can cause: the requests in flight on the killed replica fail once, as JSON 502s.
      expect(failures.filter((f) => f !== '502 replica_error')).toEqual([]);
      expect(failures.length).toBeLessThanOrEqual(10);
      expect(victim.process.pid).not.toBe(oldPid);
      expect(lines.join('\n')).toMatch(new RegExp(`${victim.name} exited \\(killed by a signal`));
      expect(await statuses()).toEqual(['gw1 UP', 'gw2 UP', 'gw3 UP']);
    },
  );

  it('SIGKILL of the replica serving a request sent on a client connection that already carried one: a JSON 502, and the model sees it once', async () => {
    for (const u of fleet.upstreams) await fetch(`${u.origin}/__reset`, { method: 'POST' });
    // One socket, kept: the second request goes where the first went, unless the load balancer closes it.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await postChat(fleet, agent, {});
      expect(first.status).toBe(200);
      const slow = postChat(fleet, agent, { delay_ms: 4000 }).catch((err: Error) => ({
        status: 0,
        text: `no answer: ${err.message}`,
      }));
      let holder: string | undefined;
      await waitUntil(
        async () => (holder = (await fleet.servers()).find((s) => s.sessions > 0)?.server) !== undefined,
        10_000,
        'a replica to hold the request',
      );
      const victim = fleet.replicas.find((r) => r.name === holder)!;
      // Killed once the model has the call (HAProxy counts the session before the replica sends it on).
      await waitUntil(async () => (await upstreamTotal(fleet)) === 2, 10_000, 'the model to have the request');
      const restarts = () => lines.filter((l) => l.includes(`${victim.name} restarted`)).length;
      const before = restarts();
      process.kill(victim.process.pid ?? 0, 'SIGKILL');
      const res = await slow;
      // HAProxy closes a connection that is not on its first request without an answer, so that the
      // client re-sends it; with one request per connection it answers the 502 instead.
      expect(res.text).toContain('"code":"replica_error"');
      expect(res.status).toBe(502);
      expect(await upstreamTotal(fleet)).toBe(2);
      await waitUntil(() => restarts() > before, 15_000, 'the restart');
      await fleet.waitForServer(victim.name, (st) => st === 'UP');
    } finally {
      agent.destroy();
    }
  });

  it('a rolling restart with a crashed replica restarts every replica, the dead one included', async () => {
    const pids = fleet.replicas.map((r) => r.process.pid);
    process.kill(pids[0] ?? 0, 'SIGKILL');
    await fleet.replicas[0].process.whenExited();
    expect(await fleet.rollingRestart()).toEqual([]);
    expect(fleet.replicas.every((r) => r.process.running)).toBe(true);
    expect(fleet.replicas.map((r) => r.process.pid).filter((pid) => pids.includes(pid))).toEqual([]);
    expect(await statuses()).toEqual(['gw1 UP', 'gw2 UP', 'gw3 UP']);
    expect((await chat(fleet, 'llama-3.1-8b')).status).toBe(200);
  });
});
