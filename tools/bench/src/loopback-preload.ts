/**
 * Preloaded (`node --require`) into servers that cannot be told which address to bind, such as
 * Portkey's gateway (`serve({ port })` binds every interface): a `listen(port)` without a host is
 * bound to 127.0.0.1, so the benchmark never exposes a server beyond loopback.
 */
import net from 'node:net';

const LOOPBACK = '127.0.0.1';
const listen = net.Server.prototype.listen;

function bindLoopback(this: net.Server, ...args: unknown[]): net.Server {
  const [first, second] = args;
  const isPort = typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first));
  if (isPort) {
    if (second === undefined || second === null) args[1] = LOOPBACK;
    else if (typeof second !== 'string') args.splice(1, 0, LOOPBACK);
  } else if (typeof first === 'object' && first !== null && 'port' in first && !('host' in first && first.host)) {
    args[0] = { ...first, host: LOOPBACK };
  }
  return (listen as (...a: unknown[]) => net.Server).apply(this, args);
}

net.Server.prototype.listen = bindLoopback as typeof listen;
