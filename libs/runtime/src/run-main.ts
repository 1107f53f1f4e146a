import { CloseList } from './close-list';
import { readCommandLine } from './command-line';

/** Longest a fatal error waits for the close list before exiting anyway, in ms. */
export const FATAL_CLOSE_MS = 5_000;

/** A process's command line: its parser (the process's `cli-args.ts`) and the usage text `--help` prints. */
export interface CommandLine<C extends { readonly command: string }> {
  parse(argv: string[]): C;
  usage: string;
}

/**
 * Runs a process: reads its command line ({@link readCommandLine}: `--help` exits 0, a command line
 * it cannot read exits 2), then runs `main` with the command and the process's one close list, and
 * exits with the code `main` resolves to. A fault nothing handled (`main` rejects, or an exception
 * nobody catches later) is written to stderr as `<service> failed: <stack>`; the close list then
 * runs, for at most {@link FATAL_CLOSE_MS}, and the process exits 1.
 */
export function runMain<C extends { readonly command: string }>(
  service: string,
  commandLine: CommandLine<C>,
  main: (cmd: Exclude<C, { command: 'help' }>, toClose: CloseList) => Promise<number>,
): void {
  const toClose = new CloseList();
  const fatal = (err: unknown): void => {
    process.stderr.write(`${service} failed: ${(err as Error)?.stack ?? String(err)}\n`);
    const deadline = new Promise((r) => setTimeout(r, FATAL_CLOSE_MS).unref());
    void Promise.race([toClose.closeAll(), deadline]).finally(() => process.exit(1));
  };
  process.once('uncaughtException', fatal);
  const run = async (): Promise<number> => {
    const cmd = readCommandLine(commandLine.parse, commandLine.usage);
    if ('exitCode' in cmd) return cmd.exitCode;
    return main(cmd, toClose);
  };
  run().then((code) => process.exit(code), fatal);
}
