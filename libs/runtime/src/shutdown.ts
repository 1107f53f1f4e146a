import type pino from 'pino';
import type { CloseList } from './close-list';
import { flushLogs } from './process-logger';

/** The signals that stop a process gracefully: a container's stop (SIGTERM) and Ctrl-C (SIGINT). */
export const STOP_SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/** How a process stops on SIGTERM or SIGINT. */
export interface StopOptions {
  logger: pino.Logger;
  /** The process's one close list; it runs after the drain. */
  toClose: CloseList;
  /**
   * Stops taking work and waits for the work in progress (the gateway: no new connections, running
   * requests finish up to `IOP_SHUTDOWN_GRACE_MS`). Resolves when done; the close list runs then.
   */
  drain?: () => Promise<void>;
  /** What the first line says, with the signal. @defaultValue 'shutting down' */
  stoppingMessage?: string;
}

/**
 * Installs the SIGTERM and SIGINT handlers. Call it before the process writes that it listens, so
 * that a signal sent as soon as that line is read stops it gracefully instead of killing it with
 * the default action. The first of the two logs the stopping line with the signal, runs `drain`,
 * then the close list ({@link closeAndLog}, `stopped`); a second signal changes nothing.
 * @returns the exit code, 0, once the process has stopped
 */
export function stopOnSignals(opts: StopOptions): Promise<number> {
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      opts.logger.info({ signal }, opts.stoppingMessage ?? 'shutting down');
      await opts.drain?.();
      await closeAndLog(opts.logger, opts.toClose, 'stopped');
      resolve(0);
    };
    for (const signal of STOP_SIGNALS) process.once(signal, () => void stop(signal));
  });
}

/**
 * The last step of every orderly way out: runs the close list, logs `message` with the names it
 * closed (`closed`, newest first) and lets the log stream finish its write. Never rejects.
 */
export async function closeAndLog(logger: pino.Logger, toClose: CloseList, message: string): Promise<void> {
  logger.info({ closed: await toClose.closeAll() }, message);
  await flushLogs(logger);
}
