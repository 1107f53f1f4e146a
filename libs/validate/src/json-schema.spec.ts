import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { edgeConfigJsonSchema } from './json-schema';

const checkedIn = join(__dirname, '..', 'edge.schema.json');

describe('edge.schema.json', () => {
  it('matches the JSON Schema generated from edgeConfigSchema', () => {
    const generated = `${JSON.stringify(edgeConfigJsonSchema(), null, 2)}\n`;
    if (process.env['UPDATE_SCHEMA'] === '1') writeFileSync(checkedIn, generated);
    let current = '';
    try {
      current = readFileSync(checkedIn, 'utf8');
    } catch {
      // missing file: reported as drift below
    }
    if (current !== generated) {
      throw new Error(
        'libs/validate/edge.schema.json is out of date with src/schema.ts. Regenerate it (and docs/configuration.md) with:\n' +
          '  npm run docs:config\nand commit the result.',
      );
    }
  });

  it('leaves keys with defaults optional for editors (input side) and forbids unknown keys', () => {
    const schema = edgeConfigJsonSchema() as { required: string[]; additionalProperties: boolean; $id: string };
    expect(schema.required).toEqual(['version', 'nodes']);
    expect(schema.additionalProperties).toBe(false);
    expect(schema.$id).toBe('urn:iop:edge-config:v1');
  });
});
