import pino from 'pino';

/**
 * Bytes of log lines held before they are written (README "Production layout"): one `write(2)` per about ten
 * access lines instead of one per line. A line waits at most {@link LOG_FLUSH_MS}.
 */
export const LOG_BUFFER_BYTES = 4096;

/** Longest a log line waits in the buffer before it is written, in ms (README "Production layout"). */
export const LOG_FLUSH_MS = 250;

/** What pino's stdout stream (sonic-boom) shows of its state: a write in flight, bytes held. */
interface LogStream {
  _writing?: boolean;
  _len?: number;
  /** Emitted when a write ends with less than a batch held. */
  once?(event: 'drain', listener: () => void): unknown;
}

/**
 * The process's logger: JSON lines (pino) on stdout at `level` (`LOG_LEVEL`), each with
 * `service`, on stdout (or on `fd`). Lines are written asynchronously in batches of up to {@link LOG_BUFFER_BYTES}, and
 * none waits longer than {@link LOG_FLUSH_MS}; an orderly exit (a stop signal, `process.exit`)
 * writes what is held, a SIGKILL loses at most that (README "Production layout"). A stdout whose reader is gone
 * (a broken log pipe) neither crashes the process nor keeps it from exiting (README "Security").
 */
export function createProcessLogger(
  service: string,
  level: pino.LevelWithSilent,
  /** Where the lines go: a file descriptor. @defaultValue stdout */
  fd: number = process.stdout.fd ?? 1,
): pino.Logger {
  const logger = pino(
    { level, base: { service } },
    pino.destination({ dest: fd, sync: false, minLength: LOG_BUFFER_BYTES }),
  );
  const stream = streamOf(logger);
  let afterWrite = false;
  // Unref'd: the timer never keeps a process alive; an exit writes what is held (pino's exit hook).
  // A tick that finds a write in flight writes what is held as soon as that write ends (sonic-boom
  // keeps what came in meanwhile until it reaches the batch size), not a tick later.
  setInterval(() => {
    if (stream === undefined || (stream._len ?? 0) === 0) return;
    if (!stream._writing) return flushHeld(logger);
    if (afterWrite) return;
    afterWrite = true;
    stream.once?.('drain', () => {
      afterWrite = false;
      if (!stream._writing && (stream._len ?? 0) > 0) flushHeld(logger);
    });
  }, LOG_FLUSH_MS).unref();
  process.stdout.on('error', () => undefined);
  return logger;
}

/** Longest {@link flushLogs} waits, in ms. */
const FLUSH_TIMEOUT_MS = 1000;
/** How often it looks whether the log stream is still writing, in ms. */
const POLL_MS = 5;

/** Starts writing the held lines; a stream already ended (the process is exiting) writes nothing more. */
function flushHeld(logger: pino.Logger): void {
  try {
    logger.flush();
  } catch {
    // sonic-boom throws once destroyed: nothing is left to write to.
  }
}

function streamOf(logger: pino.Logger): LogStream | undefined {
  return (logger as unknown as Record<symbol, LogStream | undefined>)[pino.symbols.streamSym];
}

/**
 * Writes the lines the log stream holds and lets it finish the write in flight before the process
 * exits (README "Security": a process exits on SIGTERM whatever its stdout). When the reader of
 * stdout is gone, that write fails with `EPIPE` and pino stops writing for good; exiting while it
 * is in flight instead leaves pino's synchronous flush at exit retrying the lost line on the broken
 * pipe forever, and the process never exits.
 * Resolves once nothing is held or in flight, or after {@link FLUSH_TIMEOUT_MS}; never rejects.
 */
export async function flushLogs(logger: pino.Logger): Promise<void> {
  const stream = streamOf(logger);
  const deadline = Date.now() + FLUSH_TIMEOUT_MS;
  while (stream !== undefined && Date.now() < deadline) {
    if (!stream._writing && (stream._len ?? 0) > 0) flushHeld(logger);
    if (!stream._writing && (stream._len ?? 0) === 0) return;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
