import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fencedBlockAfter, yamlBlock } from './readme-examples';

const WORKSPACE_ROOT = path.resolve(__dirname, '../../..');
const read = (file: string) => readFileSync(path.join(WORKSPACE_ROOT, file), 'utf8');

describe('README snippets copied from examples/', () => {
  it('README "Clients, priority and fair share" quotes examples/clients.yaml\'s gateway.clients verbatim', () => {
    const snippet = fencedBlockAfter(read('README.md'), 'A complete example is [`examples/clients.yaml`]');
    expect(snippet).toBe(`gateway:\n${yamlBlock(read('examples/clients.yaml'), 'clients', 2)}`);
  });
});

describe('fencedBlockAfter', () => {
  const doc = 'intro\n```yaml\nnot: this\n```\nSee the marker:\n\n```yaml\na: 1\n  b: 2\n```\ntail\n';

  it('returns the first block after the marker line, without its fences', () => {
    expect(fencedBlockAfter(doc, 'the marker')).toBe('a: 1\n  b: 2\n');
  });

  it('throws when the marker or its block is missing', () => {
    expect(() => fencedBlockAfter(doc, 'absent')).toThrow('no line contains');
    expect(() => fencedBlockAfter('marker\nno block\n', 'marker')).toThrow('no fenced block');
  });
});

describe('yamlBlock', () => {
  const yaml = [
    'gateway:',
    '  listen: x',
    '  clients:   # who asks',
    '    - id: a',
    '      weight: 3   # note',
    '',
    '                  # a deeper comment line',
    '    - id: b',
    '  max_connections: 4',
    'queue: {}',
    '',
  ].join('\n');

  it('takes the key line and every deeper line up to the next sibling', () => {
    expect(yamlBlock(yaml, 'clients', 2)).toBe(
      [
        '  clients:   # who asks',
        '    - id: a',
        '      weight: 3   # note',
        '',
        '                  # a deeper comment line',
        '    - id: b',
        '',
      ].join('\n'),
    );
  });

  it('runs to the end of the text when nothing follows at its depth, and throws on a missing key', () => {
    expect(yamlBlock('a:\n  b: 1\n', 'a', 0)).toBe('a:\n  b: 1\n\n');
    expect(() => yamlBlock(yaml, 'clients', 0)).toThrow('no line starts');
  });
});
