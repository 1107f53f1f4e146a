import { readCommandLine } from './command-line';

type Command = { command: 'serve'; config: string } | { command: 'help' };

/** A stand-in for a process's `cli-args.ts`: `--help`, or `--config FILE`. */
function parse(argv: string[]): Command {
  if (argv[0] === '--help') return { command: 'help' };
  if (argv[0] !== '--config' || !argv[1]) throw new Error('--config FILE is required');
  return { command: 'serve', config: argv[1] };
}

describe('readCommandLine', () => {
  let stdout: string;
  let stderr: string;
  const out = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) } };
  beforeEach(() => {
    stdout = '';
    stderr = '';
  });

  it('returns the command to run, writing nothing', () => {
    expect(readCommandLine(parse, 'USAGE', ['--config', 'edge.yaml'], out)).toEqual({
      command: 'serve',
      config: 'edge.yaml',
    });
    expect(stdout + stderr).toBe('');
  });

  it('prints the usage on stdout for --help and exits 0', () => {
    expect(readCommandLine(parse, 'USAGE', ['--help'], out)).toEqual({ exitCode: 0 });
    expect(stdout).toBe('USAGE\n');
    expect(stderr).toBe('');
  });

  it('writes what is wrong and the usage on stderr for a command line it cannot read, and exits 2', () => {
    expect(readCommandLine(parse, 'USAGE', [], out)).toEqual({ exitCode: 2 });
    expect(stderr).toBe('--config FILE is required\nUSAGE\n');
    expect(stdout).toBe('');
  });
});
