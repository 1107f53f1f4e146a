import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { Writable } from 'node:stream';
import { CloseList } from './close-list';
import { listen, listenOrStop } from './listen';

/** A pino logger whose lines land in `lines`, parsed. */
function capturingLogger(): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, sink), lines };
}

describe('listen', () => {
  const servers: Server[] = [];
  const server = () => {
    const s = createServer((_req, res) => res.end('ok'));
    servers.push(s);
    return s;
  };
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => (s.listening ? s.close(r) : r(undefined)))));
  });

  it('resolves once the server listens on host:port (port 0 = a free one)', async () => {
    const s = await listen(server(), { host: '127.0.0.1', port: 0 });
    const { port } = s.address() as AddressInfo;
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('ok');
  });

  it('rejects with the bind error when the port is taken', async () => {
    const taken = await listen(server(), { host: '127.0.0.1', port: 0 });
    const { port } = taken.address() as AddressInfo;
    await expect(listen(server(), { host: '127.0.0.1', port })).rejects.toThrow(/EADDRINUSE/);
  });

  it('listenOrStop: a bind error names the address on stderr, runs the close list and logs what it closed', async () => {
    const taken = await listen(server(), { host: '127.0.0.1', port: 0 });
    const { port } = taken.address() as AddressInfo;
    const { logger, lines } = capturingLogger();
    const toClose = new CloseList();
    toClose.add('queue', () => undefined);
    toClose.add('prober', () => undefined);
    let stderr = '';
    const listening = await listenOrStop(server(), { host: '127.0.0.1', port }, logger, toClose, {
      write: (t: string) => (stderr += t),
    });
    expect(listening).toBe(false);
    expect(stderr).toMatch(new RegExp(`^cannot listen on 127\\.0\\.0\\.1:${port}: listen EADDRINUSE`));
    expect(lines).toContainEqual(
      expect.objectContaining({ msg: 'stopped: cannot listen', closed: ['prober', 'queue'] }),
    );
  });

  it('listenOrStop: true once it listens, the close list left as it is', async () => {
    const { logger, lines } = capturingLogger();
    const toClose = new CloseList();
    toClose.add('queue', () => undefined);
    expect(await listenOrStop(server(), { host: '127.0.0.1', port: 0 }, logger, toClose)).toBe(true);
    expect(lines).toEqual([]);
    expect(await toClose.closeAll()).toEqual(['queue']);
  });
});
