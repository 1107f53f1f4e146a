import dockerignore from '@balena/dockerignore';
import { DockerfileParser, JSONInstruction, ModifiableInstruction, type Instruction } from 'dockerfile-ast';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';

/** One stage of the Dockerfile: its base image, name and instructions. */
export interface Stage {
  name: string | undefined;
  image: string;
  instructions: Instruction[];
}

/** `--from=<stage>` of a COPY, if any. */
export function copyFrom(i: Instruction): string | undefined {
  return i instanceof ModifiableInstruction
    ? (i
        .getFlags()
        .find((f) => f.getName() === 'from')
        ?.getValue() ?? undefined)
    : undefined;
}

/** The Dockerfile's stages, in order. */
export function parseStages(dockerfile: string): Stage[] {
  const stages: Stage[] = [];
  for (const instruction of DockerfileParser.parse(dockerfile).getInstructions()) {
    if (instruction.getKeyword() === 'FROM') {
      const args = instruction.getArguments().map((a) => a.getValue());
      stages.push({ image: args[0], name: args[2], instructions: [] });
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return stages;
}

/** What the runtime stage leaves in the image besides its files. */
export interface RuntimeImage {
  /** The directory standing for the stage's WORKDIR. */
  dir: string;
  workdir: string;
  /** ENV, with the WORKDIR rewritten to `dir` (so PATH finds the image's bin/). */
  env: Record<string, string>;
  user: string | undefined;
  expose: number[];
  entrypoint: string[];
  cmd: string[];
  /** Debian packages the stage installs with apt-get (not reproduced: the host provides them or goes without). */
  aptPackages: string[];
  /** Every shell command the stage runs, as reproduced (`npm ci ...`) or skipped (apt-get, cache cleaning). */
  commands: { command: string; reproduced: boolean }[];
}

/** Paths of the build context that `.dockerignore` leaves in, relative to `root`, under `from`. */
function contextFiles(root: string, from: string, ignore: ReturnType<typeof dockerignore>): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    if (rel !== '' && ignore.ignores(rel)) return;
    const abs = path.join(root, rel);
    if (statSync(abs).isDirectory()) for (const entry of readdirSync(abs)) walk(path.posix.join(rel, entry));
    else out.push(rel);
  };
  walk(from);
  return out;
}

/**
 * Reproduces the Dockerfile's last stage (the runtime image) in `dir` without Docker, as the
 * image build would: COPY from the build context (minus `.dockerignore`), COPY --from the build
 * stage (whose WORKDIR is the workspace root, where `nx build` left dist/), and RUN `npm ci` for
 * real (offline when npm's cache has every package). apt-get and cache cleaning are recorded, not
 * run. Any other instruction or command fails, so the reproduction cannot drift from the file.
 * @throws Error naming the instruction (and line) it cannot reproduce.
 */
export function reproduceRuntimeStage(root: string, dockerfile: string, dir: string): RuntimeImage {
  const stages = parseStages(dockerfile);
  const runtime = stages.at(-1);
  if (!runtime) throw new Error('the Dockerfile has no stage');
  const buildWorkdirs = new Map(
    stages.slice(0, -1).map((s) => [
      s.name,
      s.instructions
        .filter((i) => i.getKeyword() === 'WORKDIR')
        .at(-1)
        ?.getArguments()[0]
        ?.getValue(),
    ]),
  );
  const ignore = dockerignore().add(
    existsSync(path.join(root, '.dockerignore')) ? readFileSync(path.join(root, '.dockerignore'), 'utf8') : '',
  );
  const image: RuntimeImage = {
    dir,
    workdir: '/',
    env: {},
    user: undefined,
    expose: [],
    entrypoint: [],
    cmd: [],
    aptPackages: [],
    commands: [],
  };
  const fail = (i: Instruction, why: string): never => {
    throw new Error(`Dockerfile line ${i.getRange().start.line + 1} (${i.getKeyword()}): ${why}`);
  };
  const inImage = (p: string) =>
    p.startsWith(image.workdir) ? path.join(dir, path.relative(image.workdir, p)) : path.resolve(dir, p);
  mkdirSync(dir, { recursive: true });

  for (const i of runtime.instructions) {
    const args = i.getArguments().map((a) => a.getValue());
    switch (i.getKeyword()) {
      case 'WORKDIR':
        if (image.workdir !== '/') fail(i, 'a second WORKDIR is not reproduced');
        image.workdir = args[0];
        break;
      case 'ENV':
        for (const pair of args) {
          const eq = pair.indexOf('=');
          if (eq < 1) fail(i, `"${pair}" is not NAME=value`);
          const value = pair.slice(eq + 1).replace(/\$PATH|\$\{PATH\}/g, process.env['PATH'] ?? '');
          image.env[pair.slice(0, eq)] = value
            .split(path.delimiter)
            .map((p) => (image.workdir !== '/' && p.startsWith(image.workdir) ? inImage(p) : p))
            .join(path.delimiter);
        }
        break;
      case 'COPY': {
        const from = copyFrom(i);
        for (const flag of i instanceof ModifiableInstruction ? i.getFlags() : []) {
          if (flag.getName() !== 'from') fail(i, `the flag --${flag.getName()} is not reproduced`);
        }
        const dest = inImage(args.at(-1)!);
        for (const src of args.slice(0, -1)) {
          if (from !== undefined) {
            const workdir = buildWorkdirs.get(from) ?? fail(i, `no earlier stage named ${from} with a WORKDIR`);
            if (!src.startsWith(`${workdir}/`))
              fail(i, `${src} is outside ${workdir}, the build stage's copy of the workspace`);
            const built = path.join(root, path.relative(workdir, src));
            if (!existsSync(built)) fail(i, `${built} is missing: build it first (the build stage's RUN)`);
            // A directory's contents go into dest; a file goes into dest/ or becomes dest.
            const target =
              statSync(built).isDirectory() || !args.at(-1)!.endsWith('/')
                ? dest
                : path.join(dest, path.basename(built));
            mkdirSync(path.dirname(target), { recursive: true });
            cpSync(built, target, { recursive: true });
            continue;
          }
          const rel = path.posix.normalize(src).replace(/\/$/, '');
          const files = contextFiles(root, rel === '.' ? '' : rel, ignore);
          if (files.length === 0) fail(i, `${src} is not in the build context (missing, or excluded by .dockerignore)`);
          const isDir = statSync(path.join(root, rel)).isDirectory();
          for (const file of files) {
            const target = isDir
              ? path.join(dest, path.relative(rel, file))
              : args.at(-1)!.endsWith('/')
                ? path.join(dest, path.basename(file))
                : dest;
            mkdirSync(path.dirname(target), { recursive: true });
            cpSync(path.join(root, file), target);
          }
        }
        break;
      }
      case 'RUN':
        for (const command of (i.getArgumentsContent() ?? '')
          .replace(/\\\n/g, ' ')
          .split('&&')
          .map((c) => c.trim().replace(/\s+/g, ' '))) {
          const words = command.split(' ');
          if (words[0] === 'apt-get' && words[1] === 'install') {
            image.aptPackages.push(...words.slice(2).filter((w) => !w.startsWith('-')));
            image.commands.push({ command, reproduced: false });
          } else if (
            (words[0] === 'apt-get' && words[1] === 'update') ||
            command === 'rm -rf /var/lib/apt/lists/*' ||
            command === 'npm cache clean --force'
          ) {
            image.commands.push({ command, reproduced: false });
          } else if (
            words[0] === 'rm' &&
            words[1] === '-rf' &&
            words.slice(2).every((w) => w.startsWith('node_modules/'))
          ) {
            for (const target of words.slice(2)) rmSync(path.join(dir, target), { recursive: true, force: true });
            image.commands.push({ command, reproduced: true });
          } else if (words[0] === 'npm' && words[1] === 'ci') {
            execFileSync('npm', [...words.slice(1), '--prefer-offline'], {
              cwd: dir,
              stdio: 'pipe',
              env: { ...process.env, ...image.env, npm_config_update_notifier: 'false' },
            });
            image.commands.push({ command, reproduced: true });
          } else {
            fail(i, `the command "${command}" is not reproduced`);
          }
        }
        break;
      case 'USER':
        image.user = args[0];
        break;
      case 'EXPOSE':
        image.expose.push(...args.map((a) => Number(a.split('/')[0])));
        break;
      case 'ENTRYPOINT':
      case 'CMD': {
        const json = i instanceof JSONInstruction ? i.getJSONStrings() : [];
        if (json.length === 0)
          fail(i, 'only the exec (JSON) form is allowed: the shell form puts /bin/sh between tini and node');
        image[i.getKeyword() === 'CMD' ? 'cmd' : 'entrypoint'] = json.map((s) => s.getJSONValue());
        break;
      }
      default:
        fail(i, 'not reproduced by this test');
    }
  }
  return image;
}
