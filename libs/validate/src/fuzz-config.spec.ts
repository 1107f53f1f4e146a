import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { ConfigProblem } from './config-problem';
import { parseConfigText } from './load-config';

/**
 * Property-based tests of `validate` (README "Configuration", "Tests": fuzz): whatever the text,
 * `parseConfigText` never throws; it returns a config or problems, each with a path, a 1-based line
 * and column, a message and a fix; a value from the environment never appears in them. Seeded;
 * `FUZZ_RUNS` cases per property (default 150), `FUZZ_SEED` to replay.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 150);
const SEED = Number(process.env.FUZZ_SEED ?? 20261201);
const params = { seed: SEED, numRuns: RUNS, endOnFailure: true };

const example = readFileSync(join(__dirname, 'testing/design-example.yaml'), 'utf8');
const SECRET = 'sk-fuzz-secret-value-42';
const env = { EDGE_API_KEY: SECRET, VLLM_KEY: SECRET };

/** The problems' invariants: well-formed, positioned, with a path unless about the whole file, never a secret. */
function checkProblems(problems: ConfigProblem[], what: string): void {
  if (problems.length === 0) throw new Error(`${what}: not ok, yet no problem`);
  for (const p of problems) {
    if (typeof p.path !== 'string' || !(p.line >= 1) || !(p.column >= 1) || !p.message || !p.fix) {
      throw new Error(`${what}: malformed problem ${JSON.stringify(p)}`);
    }
    // Only a problem about the file as a whole has no path, and it says so.
    const wholeFile =
      p.message.startsWith('YAML syntax error') ||
      / is empty$/.test(p.message) ||
      p.message.startsWith('the top level of');
    if (p.path === '' && !wholeFile) throw new Error(`${what}: a problem without a path: ${JSON.stringify(p)}`);
    if (`${p.message} ${p.fix}`.includes(SECRET))
      throw new Error(`${what}: a value from the environment printed: ${JSON.stringify(p)}`);
  }
}

function run(text: string, what: string): void {
  let result: ReturnType<typeof parseConfigText>;
  try {
    result = parseConfigText(text, env);
  } catch (err) {
    throw new Error(`${what}: parseConfigText threw ${(err as Error).stack}`);
  }
  if (!result.ok) checkProblems(result.problems, what);
}

/** The design example as data, to mutate. */
const base = (() => {
  const result = parseConfigText(example, env);
  if (!result.ok) throw new Error('the design example must load');
  return JSON.parse(JSON.stringify(result.config)) as Record<string, unknown>;
})();

type Path = Array<string | number>;
/** Every path to a value in `value`. */
function paths(value: unknown, at: Path = []): Path[] {
  const out: Path[] = [at];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...paths(v, [...at, i])));
  else if (value !== null && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...at, k]));
  return out;
}
const allPaths = paths(base).filter((p) => p.length > 0);

/** One edit of the example: a value replaced by any JSON, a key removed, an unknown key added, a string with `${...}`. */
const edit = fc.record({
  path: fc.constantFrom(...allPaths),
  kind: fc.constantFrom('replace', 'remove', 'add-key', 'interpolate'),
  value: fc.jsonValue({ maxDepth: 3 }),
  key: fc.string({ maxLength: 12 }),
  variable: fc.oneof(fc.constantFrom('EDGE_API_KEY', 'UNSET_VAR', '1BAD', ''), fc.string({ maxLength: 8 })),
});

/** One generated edit. */
interface Edit {
  path: Path;
  kind: string;
  value: unknown;
  key: string;
  variable: string;
}

function apply(data: Record<string, unknown>, e: Edit): unknown {
  const copy = JSON.parse(JSON.stringify(data)) as Record<string, unknown>;
  const parent = e.path
    .slice(0, -1)
    .reduce<unknown>((node, k) => (node as Record<string | number, unknown>)[k], copy) as
    Record<string | number, unknown> | unknown[];
  const last = e.path[e.path.length - 1];
  if (e.kind === 'replace') (parent as Record<string | number, unknown>)[last] = e.value;
  else if (e.kind === 'remove') {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
  } else if (e.kind === 'add-key') {
    const target = (parent as Record<string | number, unknown>)[last];
    if (target !== null && typeof target === 'object' && !Array.isArray(target))
      (target as Record<string, unknown>)[e.key] = e.value;
  } else (parent as Record<string | number, unknown>)[last] = `x\${${e.variable}}y`;
  return copy;
}

describe('fuzz: validate over random configs (README "Configuration")', () => {
  it('never throws on any text', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.string({ unit: 'grapheme' }),
          fc.constantFrom('', '---\n---', '{', 'version: 1', '- a\n-', 'nodes: !!binary x', '&a [*a]'),
        ),
        (text) => run(text, JSON.stringify(text).slice(0, 200)),
      ),
      params,
    );
  });

  it('never throws on any YAML document, and every problem has a path and a position', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => run(stringify(value), JSON.stringify(value).slice(0, 200))),
      params,
    );
  });

  it('edits of a valid file: 1 to 4 random changes give a config or problems with paths, never a secret', () => {
    fc.assert(
      fc.property(fc.array(edit, { minLength: 1, maxLength: 4 }), (edits) => {
        let data: unknown = base;
        for (const e of edits) {
          try {
            data = apply(data as Record<string, unknown>, e);
          } catch {
            // An edit whose path an earlier edit removed: skip it.
          }
        }
        run(stringify(data), JSON.stringify(edits).slice(0, 300));
      }),
      params,
    );
  });
});
