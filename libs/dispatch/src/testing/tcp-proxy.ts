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
  /**
   * From now on, each command a client sends (a RESP array) reaches the server `ms` after the one
   * before it, in order: a link on which a client's separate commands arrive apart, with other
   * clients' commands between them. 0 (the default): at once.
   */
  paceRequests(ms: number): void;
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
  /** Commands from the client waiting for their turn (`paceRequests`), bytes of an incomplete one, and whether one is being paced. */
  paced: Buffer[];
  partial: Buffer;
  pacing: boolean;
}

/** Length of the first whole RESP command (`*<n>` bulk strings) at the start of `buf`, or 0 while it is incomplete. */
function commandLength(buf: Buffer): number {
  const line = (from: number) => {
    const end = buf.indexOf('\r\n', from, 'latin1');
    return end < 0 ? undefined : { value: Number(buf.toString('latin1', from + 1, end)), next: end + 2 };
  };
  const head = line(0);
  if (!head) return 0;
  let at = head.next;
  for (let i = 0; i < head.value; i++) {
    const bulk = line(at);
    if (!bulk || buf.length < bulk.next + bulk.value + 2) return 0;
    at = bulk.next + bulk.value + 2;
  }
  return at;
}

/**
 * Starts a proxy to `targetPort` on a free port of 127.0.0.1.
 * @throws the listen error.
 */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let target = targetPort;
  let holding: { exceptSubscribers: boolean } | undefined;
  let swallowing = false;
  let paceMs = 0;
  const pipes = new Set<Pipe>();
  const isHeld = (pipe: Pipe) => holding !== undefined && !(holding.exceptSubscribers && pipe.subscriber);

  const server: Server = createServer((client) => {
    const upstream = new Socket();
    const pipe: Pipe = {
      client,
      server: upstream,
      subscriber: false,
      held: [],
      paced: [],
      partial: Buffer.alloc(0),
      pacing: false,
    };
    // Sends the next paced chunk, then waits `paceMs` before the one after it.
    const sendPaced = () => {
      const next = pipe.paced.shift();
      if (next === undefined) {
        pipe.pacing = false;
        return;
      }
      pipe.pacing = true;
      upstream.write(next);
      setTimeout(sendPaced, paceMs);
    };
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
      if (swallowing) return;
      if (paceMs === 0 && !pipe.pacing && pipe.partial.length === 0) upstream.write(data);
      else {
        let rest = Buffer.concat([pipe.partial, data]);
        for (let n = commandLength(rest); n > 0; n = commandLength(rest)) {
          pipe.paced.push(rest.subarray(0, n));
          rest = rest.subarray(n);
        }
        pipe.partial = rest;
        if (!pipe.pacing) sendPaced();
      }
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
    paceRequests: (ms) => {
      paceMs = ms;
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
