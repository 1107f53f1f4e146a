import pino from 'pino';

/**
 * The process's logger: JSON lines (pino) on stdout at `level` (`LOG_LEVEL`), each with
 * `service`. A stdout whose reader is gone (a broken log pipe) neither crashes the process nor
 * keeps it from exiting (README "Security").
 */
export function createProcessLogger(service: string, level: pino.LevelWithSilent): pino.Logger {
  const logger = pino({ level, base: { service } });
  process.stdout.on('error', () => undefined);
  return logger;
}

/** Longest {@link flushLogs} waits, in ms. */
const FLUSH_TIMEOUT_MS = 1000;
/** How often it looks whether the log stream is still writing, in ms. */
const POLL_MS = 5;

/** What pino's stdout stream (sonic-boom) shows of an asynchronous write in flight. */
interface LogStream {
  _writing?: boolean;
}

/**
 * Lets the log stream finish the write it has in flight before the process exits (README
 * "Security": a process exits on SIGTERM whatever its stdout). When the reader of stdout is gone,
 * that write fails with `EPIPE` and pino stops writing for good; exiting while it is in flight
 * instead leaves pino's synchronous flush at exit retrying the lost line on the broken pipe
 * forever, and the process never exits.
 * Resolves once nothing is in flight, or after {@link FLUSH_TIMEOUT_MS}; never rejects.
 */
export async function flushLogs(logger: pino.Logger): Promise<void> {
  const stream = (logger as unknown as Record<symbol, LogStream | undefined>)[pino.symbols.streamSym];
  const deadline = Date.now() + FLUSH_TIMEOUT_MS;
  while (stream?._writing === true && Date.now() < deadline) await new Promise((r) => setTimeout(r, POLL_MS));
}
