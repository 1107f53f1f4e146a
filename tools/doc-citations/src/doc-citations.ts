import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** The documents code comments cite by section, by the name they are cited with. */
export const CITED_DOCUMENTS = { README: 'README.md', 'architecture.md': 'docs/architecture.md' } as const;
export type CitedDocument = keyof typeof CITED_DOCUMENTS;

/** One section citation in a file (`README "Security"`): the document, the section named, the 1-based line of its quote. */
export interface SectionCitation {
  readonly document: CitedDocument;
  readonly section: string;
  readonly line: number;
}

/**
 * Where a citation starts: the document's name, then at most a possessive, the `)` closing a
 * Markdown link, a comma and an opening parenthesis before the first quoted section:
 * `README "Security"`, `README's "Errors"`, `README, "Tests"`, `docs/architecture.md, "Settings"`,
 * `docs/architecture.md ("Request path"`, `[docs/architecture.md](docs/architecture.md), "Admission"`.
 * A quote may be escaped (`\"`, inside a JSON string). Another project's README (`autocannon's
 * README`, `tools/bench/README`) is not this repository's.
 */
const CITATION_START = /(?:(?<!'s |\/)\b(README)(?:\.md)?|\b(architecture\.md))(?:'s)?\)?,?[ \t]?\(?(?=\\?")/g;
/** A quoted section name; it may run on over a line break, with the comment marker of the next line (`//`, `*`, `#`). */
const QUOTED_SECTION = /\\?"((?:[^"\\\n]|\n[ \t]*(?:\/\/|\*|#)?[ \t]*)+)\\?"/y;
/** What joins two sections cited together: `"A", "B"`, `"A" and "B"`, `"A" or "B"`. */
const NEXT_SECTION = /(?:,|[ \t]+and|[ \t]+or)(?:\s|\/\/|\*(?!\/)|#)*(?=\\?")/y;

/** Every section citation in `text` (a source file, a test title, a Markdown or YAML comment), in order. Pure. */
export function findSectionCitations(text: string): SectionCitation[] {
  const lineAt = (index: number) => text.slice(0, index).split('\n').length;
  const found: SectionCitation[] = [];
  for (const start of text.matchAll(CITATION_START)) {
    const document: CitedDocument = start[1] ? 'README' : 'architecture.md';
    let at = start.index + start[0].length;
    for (;;) {
      QUOTED_SECTION.lastIndex = at;
      const quoted = QUOTED_SECTION.exec(text);
      if (!quoted) break;
      const section = quoted[1].replace(/\s*\n[ \t]*(?:\/\/|\*|#)?[ \t]*/g, ' ').trim();
      found.push({ document, section, line: lineAt(at) });
      NEXT_SECTION.lastIndex = at = QUOTED_SECTION.lastIndex;
      if (!NEXT_SECTION.exec(text)) break;
      at = NEXT_SECTION.lastIndex;
    }
  }
  return found;
}

/**
 * The names a Markdown document's sections may be cited by: every ATX heading (`#` to `######`)
 * outside fenced code blocks, as written, and also cut before a qualifier that follows its name
 * (` (` or `: `), so `## Configuration (\`edge.yaml\`, version 1)` is cited as "Configuration". Pure.
 */
export function sectionNames(markdown: string): Set<string> {
  const names = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const title = heading[1];
    names.add(title);
    for (const qualifier of [' (', ': '])
      if (title.includes(qualifier)) names.add(title.slice(0, title.indexOf(qualifier)));
  }
  return names;
}

/** Folders and files whose text may cite a section, relative to the workspace root. */
export const CITING_PATHS = [
  'apps',
  'libs',
  'tools',
  'deploy',
  'examples',
  'docs',
  '.github',
  'README.md',
  'Dockerfile',
  'eslint.config.mjs',
  'jest.preset.js',
] as const;
/** Never read: installs, builds, caches. */
const SKIPPED_FOLDERS = new Set(['node_modules', 'dist', 'tmp', 'coverage', '.nx']);
/** Not checked: the examples of this check's own spec cite made-up sections on purpose. */
const SKIPPED_FILES = new Set(['tools/doc-citations/src/doc-citations.spec.ts']);
/** Text files: source, tests, scripts, configs, docs. */
const TEXT_FILE = /(\.(ts|mjs|js|lua|md|ya?ml|json|cfg|sh)|Dockerfile)$/;

/** Every text file under {@link CITING_PATHS} of `root`, as `/`-separated paths relative to it, sorted. */
export function citingFiles(root: string): string[] {
  const files: string[] = [];
  const visit = (relative: string): void => {
    const stats = statSync(path.join(root, relative), { throwIfNoEntry: false });
    if (stats?.isFile() && TEXT_FILE.test(relative) && !SKIPPED_FILES.has(relative)) files.push(relative);
    if (!stats?.isDirectory()) return;
    for (const entry of readdirSync(path.join(root, relative))) {
      if (!SKIPPED_FOLDERS.has(entry)) visit(`${relative}/${entry}`);
    }
  };
  CITING_PATHS.forEach(visit);
  return files.sort();
}

/**
 * Every citation under `root` of a section its document does not have, as `file:line: <document>
 * "<section>"` (README.md and docs/architecture.md are read from `root`).
 * Empty when every citation names a section.
 */
export function brokenCitations(root: string): string[] {
  const read = (file: string) => readFileSync(path.join(root, file), 'utf8');
  const sections = {
    README: sectionNames(read(CITED_DOCUMENTS.README)),
    'architecture.md': sectionNames(read(CITED_DOCUMENTS['architecture.md'])),
  };
  return citingFiles(root).flatMap((file) =>
    findSectionCitations(read(file))
      .filter((c) => !sections[c.document].has(c.section))
      .map((c) => `${file}:${c.line}: ${CITED_DOCUMENTS[c.document]} "${c.section}"`),
  );
}
