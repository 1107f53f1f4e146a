import type { ListenAddress } from '@iop/validate';
import type { Server } from 'node:http';
import type pino from 'pino';
import type { CloseList } from './close-list';
import { closeAndLog } from './shutdown';

/**
 * Resolves once `server` listens on `host:port` (`parseListenAddress` reads it from
 * `gateway.listen`, `status.listen` or `--listen`, README "Configuration"; port 0 = a free one).
 * @throws the bind error (port taken, unknown address), as a rejection
 */
export function listen(server: Server, { host, port }: ListenAddress): Promise<Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/**
 * {@link listen} for a process that has opened everything else first: a bind error is written to
 * `stderr` as `cannot listen on host:port: <reason>`, then the close list runs and
 * `stopped: cannot listen` is logged with what it closed ({@link closeAndLog}).
 * @returns true once it listens; false after a bind error, when the process is to exit 1
 */
export async function listenOrStop(
  server: Server,
  address: ListenAddress,
  logger: pino.Logger,
  toClose: CloseList,
  stderr: { write(text: string): unknown } = process.stderr,
): Promise<boolean> {
  try {
    await listen(server, address);
    return true;
  } catch (err) {
    stderr.write(`cannot listen on ${address.host}:${address.port}: ${(err as Error).message}\n`);
    await closeAndLog(logger, toClose, 'stopped: cannot listen');
    return false;
  }
}
