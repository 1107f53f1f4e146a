import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KernelSendQueues } from './kernel-send-queue';

/**
 * The kernel's send queue of a real TCP connection, read from /proc: it grows while the client reads
 * nothing, shrinks when the client reads, and is empty once the client has everything; over IPv4,
 * IPv6 and an IPv4 client of a dual-stack listener (an IPv4-mapped address in /proc/net/tcp6).
 */
const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A connection from `connectHost` to a server on `listenHost`: the server's side and the client's. */
async function pair(listenHost: string, connectHost: string): Promise<{ server: Socket; client: Socket }> {
  const server = createServer();
  servers.push(server);
  server.listen(0, listenHost);
  await once(server, 'listening');
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect((server.address() as AddressInfo).port, connectHost);
  client.pause();
  const [side] = await accepted;
  sockets.push(client, side);
  return { server: side, client };
}

/** Writes to `socket` until Node holds bytes the kernel did not take (the kernel's queue is full). */
async function fill(socket: Socket): Promise<void> {
  const block = Buffer.alloc(256 * 1024, 'x');
  for (let i = 0; i < 400 && socket.write(block); i++) await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, 50));
}

/** Reads `bytes` from the paused `client`, then pauses it again. */
async function read(client: Socket, bytes: number): Promise<void> {
  let got = 0;
  await new Promise<void>((resolve) => {
    const onData = (d: Buffer) => {
      got += d.length;
      if (got >= bytes) {
        client.pause();
        client.off('data', onData);
        resolve();
      }
    };
    client.on('data', onData);
    client.resume();
  });
}

const linux = process.platform === 'linux';

describe('KernelSendQueues', () => {
  const cases: Array<[string, string, string]> = [
    ['IPv4', '127.0.0.1', '127.0.0.1'],
    ['IPv6', '::1', '::1'],
    ['an IPv4 client of a dual-stack listener', '::', '127.0.0.1'],
  ];
  it.each(cases)('follows a real connection over %s', async (_name, listenHost, connectHost) => {
    if (!linux)
      return expect(await new KernelSendQueues().of((await pair(listenHost, connectHost)).server)).toBe(undefined);
    const queues = new KernelSendQueues();
    const { server, client } = await pair(listenHost, connectHost);
    await fill(server);
    const full = await queues.of(server);
    expect(full).toBeGreaterThan(256 * 1024);
    // The client reads a good part: the kernel sends more of the queue, which shrinks (a new read of
    // the tables, past their 100 ms cache).
    await read(client, 2 * 1024 * 1024);
    await new Promise((r) => setTimeout(r, 150));
    expect(await queues.of(server)).toBeLessThan(full ?? 0);
    // Everything read: nothing is left queued.
    client.resume();
    if (server.writableLength > 0) await once(server, 'drain');
    await new Promise((r) => setTimeout(r, 150));
    expect(await queues.of(server)).toBe(0);
  });

  it('knows nothing of a closed socket, or when the tables cannot be read', async () => {
    const { server } = await pair('127.0.0.1', '127.0.0.1');
    expect(await new KernelSendQueues(['/nonexistent/tcp']).of(server)).toBe(undefined);
    server.destroy();
    expect(await new KernelSendQueues().of(server)).toBe(undefined);
    expect(await new KernelSendQueues().of(null)).toBe(undefined);
  });

  it("reads a table's addresses as the kernel prints them, and one read answers for 100 ms", async () => {
    const { server } = await pair('127.0.0.1', '127.0.0.1');
    const port = (n: number) => n.toString(16).toUpperCase().padStart(4, '0');
    const dir = mkdtempSync(join(tmpdir(), 'iop-tcp-'));
    const file = join(dir, 'tcp');
    const line = (tx: number) =>
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n' +
      `   0: 0100007F:${port(server.localPort ?? 0)} 0100007F:${port(server.remotePort ?? 0)} 01 ${tx.toString(16).toUpperCase().padStart(8, '0')}:00000000 00:00000000 00000000     0        0 1 1\n`;
    writeFileSync(file, line(0x1234));
    const queues = new KernelSendQueues([file]);
    expect(await queues.of(server)).toBe(0x1234);
    // Within the cache's 100 ms the same read answers, though the file changed.
    writeFileSync(file, line(0x10));
    expect(await queues.of(server)).toBe(0x1234);
    await new Promise((r) => setTimeout(r, 150));
    expect(await queues.of(server)).toBe(0x10);
  });
});
