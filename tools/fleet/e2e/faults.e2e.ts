import { waitUntil } from '@iop/dispatch/testing';
import { mkdtempSync } from 'node:fs';
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

/** One chat completion through HAProxy on a fresh connection; the body parsed when it is JSON. */
async function chat(fleet: LocalFleet, model: string, fake: Record<string, number> = {}) {
  const res = await fetch(`${fleet.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', connection: 'close' },
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

  it('SIGKILL of a replica under load: no request reaches an upstream twice; the crashed replica is restarted and back in HAProxy', async () => {
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
        const res = await chat(fleet, 'llama-3.1-8b', { delay_ms: 400 });
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
      process.kill(oldPid ?? 0, 'SIGKILL');
      await waitUntil(() => lines.some((l) => l.includes(`${victim.name} restarted`)), 15_000, 'the restart');
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
