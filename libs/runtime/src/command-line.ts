/** How a process ends without starting: 0 after `--help`, 2 after a command line it cannot read. */
export interface CommandLineExit {
  readonly exitCode: 0 | 2;
}

/** Where the usage and the error go (process.stdout and process.stderr by default). */
export interface CommandLineOutput {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
}

/**
 * Reads a process's command line with `parse`, its own flags (the gateway's or the exporter's
 * `cli-args.ts`). `--help` (`{ command: 'help' }`) prints `usage` on stdout and ends with 0; a
 * command line `parse` throws on is written to stderr, with `usage`, and ends with 2.
 * @returns the command to run, or how to exit
 */
export function readCommandLine<C extends { readonly command: string }>(
  parse: (argv: string[]) => C,
  usage: string,
  argv: string[] = process.argv.slice(2),
  out: CommandLineOutput = process,
): Exclude<C, { command: 'help' }> | CommandLineExit {
  let cmd: C;
  try {
    cmd = parse(argv);
  } catch (err) {
    out.stderr.write(`${(err as Error).message}\n${usage}\n`);
    return { exitCode: 2 };
  }
  if (cmd.command === 'help') {
    out.stdout.write(`${usage}\n`);
    return { exitCode: 0 };
  }
  // Not help, as just checked: TypeScript does not narrow a type parameter by a field's value.
  return cmd as Exclude<C, { command: 'help' }>;
}
