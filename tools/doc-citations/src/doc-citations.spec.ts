import { readFileSync } from 'node:fs';
import path from 'node:path';
import { brokenCitations, CITING_PATHS, findSectionCitations, sectionNames } from './doc-citations';

const WORKSPACE_ROOT = path.resolve(__dirname, '../../..');

describe('section citations in comments, test titles and configs', () => {
  it('every README "…" and docs/architecture.md "…" names a heading of that document', () => {
    expect(brokenCitations(WORKSPACE_ROOT)).toEqual([]);
  });

  it('re-runs when any file it reads changes (its nx test inputs cover every citing path)', () => {
    const project = JSON.parse(readFileSync(path.join(__dirname, '../project.json'), 'utf8')) as {
      namedInputs: { citingFiles: string[] };
    };
    const inputs = project.namedInputs.citingFiles;
    for (const cited of CITING_PATHS) {
      expect([`{workspaceRoot}/${cited}`, `{workspaceRoot}/${cited}/**/*`].some((i) => inputs.includes(i))).toBe(true);
    }
  });
});

describe('findSectionCitations', () => {
  it.each([
    ['// README "Security"', [['README', 'Security', 1]]],
    ['/** README\'s "Errors" table */', [['README', 'Errors', 1]]],
    ['(README, "Tests")', [['README', 'Tests', 1]]],
    ['(docs/architecture.md, "Settings")', [['architecture.md', 'Settings', 1]]],
    ['docs/architecture.md "Layering"', [['architecture.md', 'Layering', 1]]],
    ['(docs/architecture.md ("Request path", step 2))', [['architecture.md', 'Request path', 1]]],
    ['([docs/architecture.md](docs/architecture.md), "Admission")', [['architecture.md', 'Admission', 1]]],
    ['"description": "README \\"Running a fleet\\""', [['README', 'Running a fleet', 1]]],
    [
      '(README "Provider health", "Streaming",\n * "Failover" and "Affinity")',
      [
        ['README', 'Provider health', 1],
        ['README', 'Streaming', 1],
        ['README', 'Failover', 2],
        ['README', 'Affinity', 2],
      ],
    ],
    ['x\n  // (README "Operating a running\n  // fleet")', [['README', 'Operating a running fleet', 2]]],
    [
      '(docs/architecture.md, "Dead replicas" or "Redis restarts")',
      [
        ['architecture.md', 'Dead replicas', 1],
        ['architecture.md', 'Redis restarts', 1],
      ],
    ],
  ])('reads %j', (text, expected) => {
    expect(findSectionCitations(text).map((c) => [c.document, c.section, c.line])).toEqual(expected);
  });

  it.each([
    ['autocannon\'s README, "API"'],
    ['tools/bench/README "Results"'],
    ['throw new Error(\'README has no "## Errors" section\')'],
    ['README: "x"'],
  ])('ignores %j (another README, or not a citation)', (text) => {
    expect(findSectionCitations(text)).toEqual([]);
  });
});

describe('sectionNames', () => {
  it('names every heading outside code blocks, and the name before a qualifier', () => {
    const markdown = [
      '# iop-edge',
      '## Configuration (`edge.yaml`, version 1)',
      '### Queue backend',
      '```sh',
      '# a shell comment',
      '```',
      '## Status: `/status`, `/metrics` and the status exporter',
    ].join('\n');
    expect([...sectionNames(markdown)].sort()).toEqual(
      [
        'iop-edge',
        'Configuration (`edge.yaml`, version 1)',
        'Configuration',
        'Queue backend',
        'Status: `/status`, `/metrics` and the status exporter',
        'Status',
      ].sort(),
    );
  });
});
