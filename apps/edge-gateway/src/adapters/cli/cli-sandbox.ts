import { spawn } from 'node:child_process';
import { accessSync, constants, existsSync, realpathSync, statSync } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import path from 'node:path';
import type { CliSandboxMode } from '@iop/validate';
import { upstreamError } from '../../errors';

/** What the gateway spawns for one run: the file and its argv (after the file). */
export interface Launch {
  file: string;
  args: string[];
}

/** The outcome of the sandbox check: `reason` is undefined when programs can run. */
export interface SandboxCheck {
  mode: CliSandboxMode;
  reason?: string;
}

/** Options of a {@link CliSandbox}. */
export interface CliSandboxOptions {
  /** Files the program must not read (the config file); missing ones are skipped. @defaultValue [] */
  hidden?: readonly string[];
  /** Told the outcome of the check, once (the gateway logs it). */
  onCheck?: (check: SandboxCheck) => void;
  /** The bwrap executable. @defaultValue the first `bwrap` on `PATH`, else `/usr/bin/bwrap` or `/bin/bwrap` */
  bwrap?: string;
}

/** Directories where container runtimes mount secrets (Docker, Kubernetes): empty inside the sandbox. */
const SECRET_DIRS = ['/run/secrets', '/var/run/secrets'];
/** Longest the start-up check of the sandbox may take, in ms. */
const CHECK_TIMEOUT_MS = 10_000;

/**
 * How CLI programs are started (`gateway.cli_sandbox`, README "Security"):
 * - `bwrap`: each run inside bubblewrap — its own PID namespace and `/proc` (the gateway and every
 *   other process of the host are invisible: no `/proc/<pid>/environ`, `cmdline` or `mem` to read),
 *   its own IPC and UTS namespaces, no capabilities, a new session (no terminal to inject into), the
 *   filesystem read-only except `/tmp` and the program's `HOME`, the config file (`hidden`) and the
 *   container secret directories `/run/secrets`, `/var/run/secrets` unreadable. The network is the
 *   gateway's (programs call their APIs). The namespace ends with the program: nothing it started
 *   outlives it. bwrap itself is started with the program's environment only, so the sandbox's
 *   PID 1 shows no more than the program has.
 * - `none`: the program is a child of the gateway and can read the gateway's environment and
 *   command line through `/proc` (same user): only for programs trusted with the gateway's secrets.
 * Whether bwrap works is checked once, by running it (`check`); until it passes no program starts.
 */
export class CliSandbox {
  private checked: Promise<SandboxCheck> | undefined;
  private readonly bwrap: string | undefined;
  /** The options every run shares (root, `/dev`, `/proc`, `/tmp`, secret directories), found once. */
  private readonly baseArgs: string[] = [];
  /** Whether a program's HOME is a directory, by HOME: bound writable when it is. */
  private readonly homes = new Map<string, boolean>();

  /** @throws never; a missing bwrap shows in {@link check}. */
  constructor(
    readonly mode: CliSandboxMode,
    private readonly options: CliSandboxOptions = {},
  ) {
    this.bwrap = mode === 'bwrap' ? (options.bwrap ?? findOnPath('bwrap', process.env.PATH)) : undefined;
    if (mode === 'none') return;
    this.baseArgs.push('--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc');
    if (isDirectory('/tmp')) this.baseArgs.push('--bind', '/tmp', '/tmp');
    for (const dir of unique(SECRET_DIRS.filter(isDirectory).map((d) => realpathSync(d)))) {
      this.baseArgs.push('--tmpfs', dir);
    }
  }

  /**
   * Runs the check once (later calls share it): in `bwrap` mode a sandboxed `node --version` must
   * exit 0. Never rejects: the outcome carries the reason it failed.
   */
  check(): Promise<SandboxCheck> {
    this.checked ??= this.runCheck().then((result) => {
      this.options.onCheck?.(result);
      return result;
    });
    return this.checked;
  }

  /**
   * What to spawn for `command` with environment `env`, once the sandbox works and the program exists.
   * @throws UpstreamError 502 (message for the log only) when the sandbox does not work on this host,
   *   or when the program is not found or not executable (as a failed spawn, `ENOENT`/`EACCES`).
   */
  async launch(command: readonly string[], env: Readonly<Record<string, string>>): Promise<Launch> {
    const [program, ...args] = command;
    if (this.mode === 'none') return { file: program, args };
    const { reason } = await this.check();
    if (reason !== undefined || this.bwrap === undefined) {
      throw upstreamError(
        `CLI programs do not run: the sandbox (gateway.cli_sandbox: bwrap) does not work on this host (${reason ?? 'bwrap not found'}). Install bubblewrap, or set gateway.cli_sandbox: none for programs trusted with the gateway's secrets (README "Security").`,
      );
    }
    await checkProgram(program, env.PATH);
    return { file: this.bwrap, args: [...this.bwrapArgs(env.HOME), '--', program, ...args] };
  }

  /**
   * bwrap's options for a run whose program has `home` as its HOME (bound writable when it is a
   * directory). The hidden files are resolved on every run: a config file replaced through a
   * symlink (a Kubernetes ConfigMap) is hidden where it is now.
   */
  private bwrapArgs(home: string | undefined): string[] {
    const args = [...this.baseArgs];
    if (home && home !== '/') {
      if (!this.homes.has(home)) this.homes.set(home, isDirectory(home));
      if (this.homes.get(home)) args.push('--bind', home, home);
    }
    const files = (this.options.hidden ?? [])
      .filter((f) => existsSync(f))
      .flatMap((f) => [path.resolve(f), realpathSync(f)]);
    for (const file of unique(files)) args.push('--ro-bind', '/dev/null', file);
    args.push('--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try');
    args.push('--new-session', '--die-with-parent', '--cap-drop', 'ALL');
    return args;
  }

  private async runCheck(): Promise<SandboxCheck> {
    if (this.mode === 'none') return { mode: 'none' };
    if (this.bwrap === undefined) return { mode: 'bwrap', reason: 'bwrap not found on PATH' };
    const bwrap = this.bwrap;
    const argv = [...this.bwrapArgs(undefined), '--', process.execPath, '--version'];
    const reason = await new Promise<string | undefined>((resolve) => {
      const child = spawn(bwrap, argv, { env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-500)));
      const timer = setTimeout(() => child.kill('SIGKILL'), CHECK_TIMEOUT_MS);
      child.on('error', (err) => resolve(err.message));
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        resolve(code === 0 ? undefined : stderr.trim() || `bwrap exited with ${code ?? signal}`);
      });
    });
    return { mode: 'bwrap', reason };
  }
}

/**
 * Fails as a spawn would when `program` cannot be run: a path is checked as it is, a bare name is
 * looked up on `pathVar` (the program's own `PATH`, as bwrap's `execvp` does inside the sandbox).
 * @throws UpstreamError 502 naming the program's base name and `ENOENT` or `EACCES`.
 */
async function checkProgram(program: string, pathVar: string | undefined): Promise<void> {
  const candidates = program.includes('/')
    ? [program]
    : (pathVar ?? '').split(':').map((dir) => path.join(dir || '.', program));
  let code = 'ENOENT';
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK);
      if (!(await stat(candidate)).isDirectory()) return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EACCES') code = 'EACCES';
    }
  }
  throw upstreamError(
    `The CLI model "${path.basename(program)}" could not be started (${code}); check its command in edge.yaml.`,
  );
}

/** The first executable `name` in the directories of `pathVar`, or undefined. */
function findOnPath(name: string, pathVar: string | undefined): string | undefined {
  for (const dir of [...(pathVar ?? '').split(':').filter(Boolean), '/usr/bin', '/bin']) {
    const file = path.join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

function isDirectory(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

const unique = (items: string[]) => [...new Set(items)];
