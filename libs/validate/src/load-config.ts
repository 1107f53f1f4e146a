import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { LineCounter, parseDocument } from 'yaml';
import { type ConfigProblem, type PathSegments, formatPath, parsePath } from './config-problem';
import { interpolateEnv } from './interpolate-env';
import { DEFAULT_MESSAGE, describeIssues } from './schema-issues';
import { type EdgeConfig, edgeConfigSchema } from './schema';
import { checkSemantics } from './semantic-rules';
import type { SettingPattern } from './secret-settings';
import { pathAt, positionOf } from './yaml-positions';

/** How a process loads `edge.yaml`. */
export interface LoadOptions {
  /**
   * Settings whose unset `${VAR}` is kept as written instead of being a problem: settings this
   * process never reads (the status exporter: `GATEWAY_ONLY_SECRETS`). @defaultValue [] (every `${VAR}` must be set)
   */
  readonly unsetAllowedAt?: readonly SettingPattern[];
}

/**
 * Outcome of loading `edge.yaml` (docs/architecture.md, "Settings"): the config with defaults applied and the sha256
 * (hex) of the file text, or every problem found, sorted by position.
 */
export type LoadResult = { ok: true; config: EdgeConfig; hash: string } | { ok: false; problems: ConfigProblem[] };

/**
 * Parses and validates the text of an `edge.yaml` (docs/architecture.md, "Settings"), in stages, each returning all its problems:
 * 1. YAML syntax (incl. duplicate keys, whose problem names the key's path); on errors nothing
 *    further is checked;
 * 2. `${VAR}` interpolation in string values from `env`: an unset variable is a problem naming it;
 * 3. the zod schema (`edgeConfigSchema`): unknown keys, types, formats; one problem per path (the
 *    first issue of a value; none for a value whose `${VAR}` is unset, already reported);
 * 4. the semantic rules ({@link checkSemantics}), when the schema passed.
 * Every problem carries a path, the 1-based line/column of the YAML node and a fix sentence.
 * Values substituted from `env` are scrubbed from all text (secrets never appear).
 * `sourceName` is only used in wording about the file as a whole; `options` as {@link LoadOptions}.
 * Pure; never throws.
 */
export function parseConfigText(
  text: string,
  env: Record<string, string | undefined>,
  sourceName = 'edge.yaml',
  options: LoadOptions = {},
): LoadResult {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  const at = (segments: PathSegments, where: 'value' | 'key' = 'value') =>
    positionOf(doc, lineCounter, segments, where);
  if (doc.errors.length > 0) {
    return fail(
      doc.errors.map((error) => {
        const { line, col } = lineCounter.linePos(error.pos[0]);
        // A duplicate key sits in a map the parser read: name it, as the other stages do.
        const key = error.code === 'DUPLICATE_KEY' ? pathAt(doc, error.pos[0]) : undefined;
        return {
          path: key ? formatPath(key) : '',
          line,
          column: col,
          message: `YAML syntax error: ${error.message}`,
          fix: syntaxFix(error.code),
        };
      }),
    );
  }
  if (doc.contents === null) {
    return fail([
      {
        path: '',
        line: 1,
        column: 1,
        message: `${sourceName} is empty`,
        fix: 'start the file with "version: 1" and declare at least one node under "nodes".',
      },
    ]);
  }
  // Aliases: a bomb (one alias expanding into millions of nodes) makes the YAML library refuse;
  // a cycle (`&a [*a]`) is refused below. Neither reaches the schema.
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (error) {
    return fail([
      {
        path: '',
        line: 1,
        column: 1,
        message: `YAML syntax error: ${(error as Error).message}`,
        fix: 'write the values out instead of expanding aliases (*name) that many times.',
      },
    ]);
  }
  const cycle = findCycle(data);
  if (cycle) {
    return fail([
      {
        path: formatPath(cycle),
        ...at(cycle),
        message: 'a YAML alias here refers to a node that contains it (a cycle)',
        fix: 'replace the alias (*name) with the values it should hold.',
      },
    ]);
  }
  const { value, problems: unset, secrets } = interpolateEnv(data, env, options.unsetAllowedAt);
  const problems: ConfigProblem[] = unset.map((p) => ({
    path: formatPath(p.segments),
    ...at(p.segments),
    message: p.message,
    fix: p.fix,
  }));
  const secret = (p: ConfigProblem): ConfigProblem => ({
    ...p,
    message: scrub(p.message, secrets),
    fix: scrub(p.fix, secrets),
  });
  const parsed = edgeConfigSchema.safeParse(value, { error: () => DEFAULT_MESSAGE });
  if (!parsed.success) {
    // One mistake, one problem: a value gets the first of its issues (a wrong format, not also the
    // range it would then break), and none where an unset variable already said why it is wrong.
    const reported = new Set(problems.map((p) => p.path));
    for (const p of describeIssues(parsed.error.issues, edgeConfigSchema, value)) {
      const path = formatPath(p.segments);
      if (reported.has(path)) continue;
      reported.add(path);
      // The whole document of the wrong type: say so, rather than an empty path.
      const whole = p.segments.length === 0;
      problems.push({
        path,
        ...at(p.segments, p.at),
        message: whole ? `the top level of ${sourceName} must be a map of settings; ${p.message}` : p.message,
        fix: whole ? 'start the file with "version: 1" and declare at least one node under "nodes".' : p.fix,
      });
    }
    return fail(problems.map(secret));
  }
  for (const p of checkSemantics(parsed.data)) problems.push({ ...p, ...at(parsePath(p.path)) });
  if (problems.length > 0) return fail(problems.map(secret));
  return { ok: true, config: parsed.data, hash: createHash('sha256').update(text).digest('hex') };
}

/**
 * Reads `file` (UTF-8) and validates it with {@link parseConfigText}. An unreadable file is one
 * problem with path `""` at 1:1. Never throws; callers that must refuse to start wrap the
 * problems in a `ConfigError`.
 */
export function loadConfigFile(
  file: string,
  env: Record<string, string | undefined> = process.env,
  options: LoadOptions = {},
): LoadResult {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
    return fail([
      {
        path: '',
        line: 1,
        column: 1,
        message: `cannot read ${file} (${code})`,
        fix: 'check the path and that the file exists and is readable.',
      },
    ]);
  }
  return parseConfigText(text, env, file, options);
}

/** Most alias expansions a file may use (the YAML library's guard against alias bombs). */
const MAX_ALIAS_COUNT = 100;

/**
 * The path to the first value that contains itself (a YAML alias to one of its own ancestors), or
 * `undefined`. Iterative, so any depth is safe.
 */
function findCycle(root: unknown): PathSegments | undefined {
  const stack: Array<{ value: unknown; path: PathSegments; ancestors: ReadonlySet<object> }> = [
    { value: root, path: [], ancestors: new Set() },
  ];
  while (stack.length > 0) {
    const { value, path, ancestors } = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (ancestors.has(value)) return path;
    const inner = new Set(ancestors).add(value);
    const entries: Array<[string | number, unknown]> = Array.isArray(value)
      ? value.map((v, i) => [i, v])
      : Object.entries(value);
    for (const [key, child] of entries) stack.push({ value: child, path: [...path, key], ancestors: inner });
  }
  return undefined;
}

function fail(problems: ConfigProblem[]): LoadResult {
  return { ok: false, problems: problems.sort((a, b) => a.line - b.line || a.column - b.column) };
}

/** Replaces each secret with `***`; values shorter than 4 characters are left alone (too common to scrub, too short to be secrets). */
function scrub(text: string, secrets: ReadonlySet<string>): string {
  let out = text;
  for (const secret of secrets) if (secret.length >= 4) out = out.split(secret).join('***');
  return out;
}

function syntaxFix(code: string): string {
  switch (code) {
    case 'DUPLICATE_KEY':
      return 'keep one of the two keys; a key may appear once per map.';
    case 'BAD_INDENT':
    case 'MISSING_CHAR':
    case 'UNEXPECTED_TOKEN':
      return 'check the indentation and the brackets/quotes on this line and the one before.';
    case 'MULTIPLE_DOCS':
      return 'keep a single YAML document in the file (remove the extra "---").';
    default:
      return 'fix the YAML syntax at this position.';
  }
}
