import { CloseList } from './close-list';

/** Longest a fatal error waits for the close list before exiting anyway, in ms. */
export const FATAL_CLOSE_MS = 5_000;

/**
 * Runs a process's `main` with the process's one close list and exits with the code `main`
 * resolves to. A fault nothing handled (`main` rejects, or an exception nobody catches later) is
 * written to stderr as `<service> failed: <stack>`; the close list then runs, for at most
 * {@link FATAL_CLOSE_MS}, and the process exits 1.
 */
export function runMain(service: string, main: (toClose: CloseList) => Promise<number>): void {
  const toClose = new CloseList();
  const fatal = (err: unknown): void => {
    process.stderr.write(`${service} failed: ${(err as Error)?.stack ?? String(err)}\n`);
    const deadline = new Promise((r) => setTimeout(r, FATAL_CLOSE_MS).unref());
    void Promise.race([toClose.closeAll(), deadline]).finally(() => process.exit(1));
  };
  process.once('uncaughtException', fatal);
  main(toClose).then((code) => process.exit(code), fatal);
}
