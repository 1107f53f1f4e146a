import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CONFIG_REFERENCE_COMMAND,
  configReferenceMarkdown,
  githubAnchor,
  type JsonSchemaNode,
  settingsWithoutDescription,
} from './config-reference';

/** The committed reference (workspace root `docs/configuration.md`). */
const committed = join(__dirname, '..', '..', '..', 'docs', 'configuration.md');

describe('docs/configuration.md', () => {
  it('matches the reference generated from the config schema', () => {
    const generated = configReferenceMarkdown();
    // Only `npm run docs:config` (UPDATE_SCHEMA=1) writes; a plain test run never touches the tree.
    if (process.env['UPDATE_SCHEMA'] === '1') writeFileSync(committed, generated);
    let current = '';
    try {
      current = readFileSync(committed, 'utf8');
    } catch {
      // missing file: reported as drift below
    }
    if (current !== generated) {
      throw new Error(
        `docs/configuration.md is out of date with the config schema (libs/validate/src/*schema*.ts). Regenerate it with:\n  ${CONFIG_REFERENCE_COMMAND}\nand commit the result.`,
      );
    }
  });

  it('every setting of the schema has a description (.meta({ description }) on the zod field)', () => {
    expect(settingsWithoutDescription()).toEqual([]);
  });

  it('has a section per object of the file, in schema order', () => {
    const headings = configReferenceMarkdown()
      .split('\n')
      .filter((line) => line.startsWith('## '));
    expect(headings).toEqual([
      '## Top level',
      '## `gateway`',
      '## `gateway.clients[]`',
      '## `gateway.cors`',
      '## `queue`',
      '## `health`',
      '## `status`',
      '## `nodes[]`',
      '## `nodes[].adapters[]` (type: `ollama`, `vllm`, `openai_compat`)',
      '## `nodes[].adapters[]` (type: `cli`)',
      '## `nodes[].providers[]`',
      '## `nodes[].providers[].models[]` (object form)',
      '## `routes[]`',
    ]);
  });

  it('shows type, default, range and description of a setting, and defaults in words', () => {
    const lines = configReferenceMarkdown().split('\n');
    const row = (setting: string, after: string) =>
      lines.slice(lines.indexOf(after)).find((line) => line.startsWith(`| \`${setting}\` |`));
    expect(row('weight', '## `gateway.clients[]`')).toBe(
      "| `weight` | integer | `1` | 1 to 100 | Share of slots inside its band while backlogged, relative to other clients' weights. |",
    );
    expect(row('max_wait_ms', '## `queue`')).toMatch(/^\| `max_wait_ms` \| integer \| `60000` \| ≥ 1 \| /);
    expect(row('max_connections_per_address', '## `gateway`')).toMatch(/\| half of `max_connections` \| ≥ 1 \|/);
    expect(row('version', '## Top level')).toMatch(/^\| `version` \| integer \| required \| `1` \|/);
    expect(row('prompt_format', '## `nodes[].adapters[]` (type: `cli`)')).toMatch(/\| `text` \| `text`, `jsonl` \|/);
  });

  it('flags a setting without a description, by path', () => {
    const schema: JsonSchemaNode = {
      type: 'object',
      properties: {
        a: { type: 'integer', description: 'A.' },
        b: {
          type: 'array',
          description: 'B.',
          items: { type: 'object', properties: { c: { type: 'string' } } },
        },
      },
    };
    expect(settingsWithoutDescription(schema)).toEqual(['b[].c']);
  });

  it("links to a heading by GitHub's anchor", () => {
    expect(githubAnchor('`nodes[].adapters[]` (type: `cli`)')).toBe('nodesadapters-type-cli');
    expect(githubAnchor('`gateway.clients[]`')).toBe('gatewayclients');
  });
});
