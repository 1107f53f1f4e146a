/** Facts about a bench run for the report's header and `latest.json` (`BenchResults.meta`). */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** The workspace root: the nearest directory above the bench's bundle with nx.json, else the working directory. */
export function workspaceRoot(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'nx.json'))) return dir;
    if (path.dirname(dir) === dir) return process.cwd();
  }
}

/** The short commit of `root`, `<sha> (with uncommitted changes)` when its tree is dirty, `unknown` without git. */
export function gitCommit(root: string): string {
  try {
    const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain'], { cwd: root, encoding: 'utf8' }).trim() !== '';
    return dirty ? `${sha} (with uncommitted changes)` : sha;
  } catch {
    return 'unknown';
  }
}

/** The bench's own arguments as typed after the command (` -- …` under `npm run bench`), or ''. */
export function argsSuffix(): string {
  const args = process.argv.slice(2);
  return args.length
    ? process.env.npm_lifecycle_event === 'bench'
      ? ` -- ${args.join(' ')}`
      : ` ${args.join(' ')}`
    : '';
}

/** `JSON.stringify` replacer: JSON has no NaN, so not-measured numbers are written as null. */
export function jsonNumbers(_key: string, value: unknown): unknown {
  return typeof value === 'number' && !Number.isFinite(value) ? null : value;
}
