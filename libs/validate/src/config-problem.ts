/**
 * One thing wrong with a config file (docs/architecture.md, "Settings"): where it is and how to fix it.
 * Never contains the value of an interpolated `${VAR}` (secrets stay out of error text).
 */
export interface ConfigProblem {
  /** Dotted path into the file, e.g. `nodes[0].providers[1].adapter`; `""` for the file itself. */
  path: string;
  /** 1-based line of the YAML node at `path`, or of its nearest existing parent. */
  line: number;
  /** 1-based column of that node. */
  column: number;
  /** What is wrong, without a trailing period. */
  message: string;
  /** A sentence saying how to fix it. */
  fix: string;
}

/** A path into the parsed file as keys and sequence indices, e.g. `['nodes', 0, 'id']`. */
export type PathSegments = ReadonlyArray<string | number>;

/** Renders `['nodes', 0, 'providers', 1]` as `nodes[0].providers[1]`. */
export function formatPath(segments: PathSegments): string {
  return segments.reduce<string>((path, segment) => {
    if (typeof segment === 'number') return `${path}[${segment}]`;
    // A key that is not a plain name (empty, with dots, brackets or spaces) is quoted, so every problem names a path.
    if (!PLAIN_KEY.test(segment)) return `${path}[${JSON.stringify(segment)}]`;
    return path ? `${path}.${segment}` : segment;
  }, '');
}

/** Keys written as `.key` in a path; any other key is written `["key"]`. */
const PLAIN_KEY = /^[A-Za-z0-9_$-]+$/;

/** Inverse of {@link formatPath} for the plain keys a config uses. */
export function parsePath(path: string): PathSegments {
  return [...path.matchAll(/\[(\d+)\]|([^.[\]]+)/g)].map(([, index, key]) =>
    index === undefined ? key : Number(index),
  );
}

/**
 * Renders problems one per line, compiler style:
 * `edge.yaml:12:9 nodes[0].providers[1].adapter: adapter "vllm-9" is not defined on node "gpu-a". Fix: use one of: vllm-0, echo.`
 */
export function formatProblems(file: string, problems: readonly ConfigProblem[]): string {
  return problems
    .map((p) => `${file}:${p.line}:${p.column} ${p.path ? `${p.path}: ` : ''}${p.message}. Fix: ${p.fix}`)
    .join('\n');
}

/**
 * Thrown by entry points (gateway, exporter) that refuse to start on an invalid file (docs/architecture.md, "Settings").
 * `message` is {@link formatProblems} of every problem, so printing the error is enough.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly file: string,
    readonly problems: ConfigProblem[],
  ) {
    super(
      `${file} is not a valid edge config (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${formatProblems(file, problems)}`,
    );
  }
}
