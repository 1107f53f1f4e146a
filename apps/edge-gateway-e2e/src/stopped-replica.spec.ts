import { fleetYaml } from '@iop/fake-upstream';
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './testing/gateway-process';

/**
 * README "Security" (row "slow or many clients"): an idle keep-alive connection is closed after
 * `gateway.keep_alive_timeout_ms`, but only when it is idle. A replica whose process was stopped
 * (SIGSTOP: a paused container, a debugger, a VM migration) finds on resuming requests that clients
 * sent on its kept-alive connections meanwhile, still unread in the kernel buffer, while the timers
 * that expired during the stop run first: those connections must be served, not closed as idle
 * (the clients would see ECONNRESET for requests that reached the replica).
 */
const KEEP_ALIVE_MS = 2000;
/** How long the process stays stopped, in ms: past the keep-alive time (and Node's 1 s margin on it). */
const STOPPED_MS = 4000;
/** Kept-alive connections, each with one request sent while the process is stopped. */
const CONNECTIONS = 8;

/** fleetYaml with the keep-alive time of this file; no upstream is called (`/healthz` only). */
const yaml = () => fleetYaml().replace('gateway:\n', `gateway:\n  keep_alive_timeout_ms: ${KEEP_ALIVE_MS}\n`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One `GET /healthz` through `agent`: its status and whether it went on a kept-alive connection. */
function healthz(url: string, agent: Agent): Promise<{ status: number; reused: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/healthz`, { agent }, (res) => {
      res.resume();
      res.once('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
    });
    req.once('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('no answer within 10 s')));
    req.end();
  });
}

/** A raw connection to `url` and everything the server sent on it so far. */
async function open(url: string): Promise<{ socket: Socket; received: () => string }> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port) });
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  socket.on('error', () => undefined);
  await new Promise((r) => socket.once('connect', r));
  return { socket, received: () => text };
}

const GET = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';

/** Waits until `received()` holds `n` status lines, at most `ms`; returns them. */
async function statuses(received: () => string, n: number, ms = 5000): Promise<string[]> {
  const deadline = Date.now() + ms;
  const lines = () => received().match(/HTTP\/1\.1 \d{3}/g) ?? [];
  while (lines().length < n && Date.now() < deadline) await sleep(10);
  return lines();
}

describe('a replica stopped and resumed', () => {
  let gateway: GatewayProcess | undefined;
  afterEach(async () => {
    if (gateway) gateway.child.kill('SIGCONT');
    await gateway?.kill();
    gateway = undefined;
  });

  it('answers the requests sent on its kept-alive connections while it was stopped', async () => {
    gateway = await spawnGateway(writeTempConfig(yaml()), {
      env: { UPSTREAM: 'http://127.0.0.1:1/v1', UPSTREAM_KEY: 'k' },
    });
    const url = gateway.url;
    // One agent per connection, so that each second request goes on the connection of the first.
    const agents = Array.from({ length: CONNECTIONS }, () => new Agent({ keepAlive: true, maxSockets: 1 }));
    try {
      const first = await Promise.all(agents.map((a) => healthz(url, a)));
      expect(first.map((r) => r.status)).toEqual(agents.map(() => 200));

      gateway.child.kill('SIGSTOP');
      // Within the client's keep-alive window (the server's hint `timeout=2` less Node's 1 s): the
      // requests go on the idle connections and wait in the stopped process's kernel buffer.
      await sleep(200);
      const second = Promise.allSettled(agents.map((a) => healthz(url, a)));
      await sleep(STOPPED_MS - 200);
      gateway.child.kill('SIGCONT');

      const results = await second;
      const failures = results.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
      expect(failures).toEqual([]);
      const answered = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      expect(answered).toEqual(agents.map(() => ({ status: 200, reused: true })));
    } finally {
      for (const a of agents) a.destroy();
    }
  }, 30_000);

  it('at the connection cap, and past the header time, still answers what waited in its buffer', async () => {
    // Cap 4 for everyone (the test's one address), headers due within 1 s, keep-alive out of the way.
    const capped = fleetYaml().replace(
      'gateway:\n',
      'gateway:\n  max_connections: 4\n  max_connections_per_address: 4\n  keep_alive_timeout_ms: 60000\n  header_timeout_ms: 1000\n',
    );
    gateway = await spawnGateway(writeTempConfig(capped), {
      env: { UPSTREAM: 'http://127.0.0.1:1/v1', UPSTREAM_KEY: 'k' },
    });
    const { url } = gateway;
    const idle = await Promise.all([1, 2, 3].map(() => open(url)));
    for (const c of idle) c.socket.write(GET);
    for (const c of idle) expect(await statuses(c.received, 1)).toEqual(['HTTP/1.1 200']);
    const fresh = await open(url);
    await sleep(200); // accepted: the fourth slot, its header time running
    try {
      gateway.child.kill('SIGSTOP');
      // A newcomer first (it waits in the listen backlog), then a request on every open connection.
      const newcomer = await open(url);
      newcomer.socket.write(GET);
      await sleep(100);
      for (const c of [...idle, fresh]) c.socket.write(GET);
      await sleep(STOPPED_MS - 100);
      gateway.child.kill('SIGCONT');

      for (const c of idle) expect(await statuses(c.received, 2)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200']);
      expect(await statuses(fresh.received, 1)).toEqual(['HTTP/1.1 200']);
      // The newcomer gets a slot once a connection that has answered is idle again, or is refused
      // unanswered: either way no request that reached the gateway before it was lost.
      const answered = await statuses(newcomer.received, 1, 2000);
      expect(answered.length > 0 ? answered : [newcomer.socket.destroyed]).toEqual(
        answered.length > 0 ? ['HTTP/1.1 200'] : [true],
      );
      newcomer.socket.destroy();
    } finally {
      for (const c of idle) c.socket.destroy();
      fresh.socket.destroy();
    }
  }, 30_000);
});
