/** What {@link flushLogs} needs of a pino logger. */
interface Flushable {
  flush(cb?: (err?: Error) => void): void;
}

/** Longest {@link flushLogs} waits, in ms. */
const FLUSH_TIMEOUT_MS = 1000;

/**
 * Flushes the logger's buffered lines through the event loop before the process exits (README
 * "Security": a process exits on SIGTERM whatever its stdout). When the reader of stdout is gone,
 * the failed write reports `EPIPE` here and pino stops writing; without this, pino's synchronous
 * flush at exit retries the lost lines on a broken pipe forever and the process never exits.
 * Resolves after the flush, its failure, or {@link FLUSH_TIMEOUT_MS}; never rejects.
 */
export function flushLogs(logger: Flushable): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, FLUSH_TIMEOUT_MS);
    try {
      logger.flush(() => {
        clearTimeout(timer);
        // Let the stream's own 'error' handler (pino: stop writing on EPIPE) run first.
        setImmediate(resolve);
      });
    } catch {
      clearTimeout(timer);
      resolve();
    }
  });
}
