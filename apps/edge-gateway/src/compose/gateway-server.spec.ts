import { CloseList } from '@iop/runtime';
import { createServer, type Server } from 'node:http';
import { serverListening } from './gateway-server';

/** A server listening on `host` port 0; resolves once it listens. */
function listening(host: string): Promise<Server> {
  const server = createServer();
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve(server));
  });
}

describe('serverListening: the bound address of the "listening on" line', () => {
  it.each([
    ['127.0.0.1', /^127\.0\.0\.1:\d+$/],
    ['::1', /^\[::1\]:\d+$/],
  ])('listening on %s gives %s, a URL once http:// is put before it', async (host, shape) => {
    const server = await listening(host);
    const toClose = new CloseList();
    try {
      const bound = serverListening(server, toClose, 'fallback:0');
      expect(bound).toMatch(shape);
      expect(new URL(`http://${bound}`).port).toBe(String((server.address() as { port: number }).port));
      // The hook it registered closes the server.
      expect(await toClose.closeAll()).toEqual(['server']);
      expect(server.listening).toBe(false);
    } finally {
      if (server.listening) await new Promise((r) => server.close(r));
    }
  });
});
