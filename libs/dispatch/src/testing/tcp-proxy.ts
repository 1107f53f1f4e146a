import { createServer, Socket, type Server } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 between a Redis client and a redis-server, for fault tests: replies that
 * come late (held, then delivered), requests that never arrive (swallowed), and a target that changes
 * under open connections (a failover behind one endpoint).
 */
export interface TcpProxy {
  /** The port clients connect to. */
  readonly port: number;
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string;
  /** Connections opened from now on go to `port` on 127.0.0.1; open ones keep their backend. */
  setTarget(port: number): void;
  /**
   * From now on, bytes from the server are held back (commands still reach the server and run), on
   * every connection or, with `exceptSubscribers`, on those that never sent SUBSCRIBE.
   */
  holdReplies(opts?: { exceptSubscribers?: boolean }): void;
  /** Delivers every held reply, in order, and stops holding. */
  releaseReplies(): void;
  /** While `on`, bytes from clients are dropped (commands never reach the server). */
  swallowRequests(on: boolean): void;
  /** Connections open right now. */
  readonly openConnections: number;
  /** Stops listening and destroys every connection. */
  close(): Promise<void>;
}

interface Pipe {
  readonly client: Socket;
  readonly server: Socket;
  subscriber: boolean;
  held: Buffer[];
}

/**
 * Starts a proxy to `targetPort` on a free port of 127.0.0.1.
 * @throws the listen error.
 */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let target = targetPort;
  let holding: { exceptSubscribers: boolean } | undefined;
  let swallowing = false;
  const pipes = new Set<Pipe>();
  const isHeld = (pipe: Pipe) => holding !== undefined && !(holding.exceptSubscribers && pipe.subscriber);

  const server: Server = createServer((client) => {
    const upstream = new Socket();
    const pipe: Pipe = { client, server: upstream, subscriber: false, held: [] };
    pipes.add(pipe);
    const end = () => {
      pipes.delete(pipe);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.on('data', (data: Buffer) => {
      if (/subscribe\r\n/i.test(data.toString('latin1'))) pipe.subscriber = true;
      if (!swallowing) upstream.write(data);
    });
    upstream.on('data', (data: Buffer) => {
      if (isHeld(pipe)) pipe.held.push(data);
      else client.write(data);
    });
    upstream.connect(target, '127.0.0.1');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    setTarget: (p) => {
      target = p;
    },
    holdReplies: (opts = {}) => {
      holding = { exceptSubscribers: opts.exceptSubscribers ?? false };
    },
    releaseReplies: () => {
      holding = undefined;
      for (const pipe of pipes) for (const data of pipe.held.splice(0)) pipe.client.write(data);
    },
    swallowRequests: (on) => {
      swallowing = on;
    },
    get openConnections() {
      return pipes.size;
    },
    close: async () => {
      for (const pipe of [...pipes]) {
        pipe.client.destroy();
        pipe.server.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
