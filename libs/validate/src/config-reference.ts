import { edgeConfigJsonSchema } from './json-schema';
import { DEFAULT_IN_WORDS } from './schema-fields';

/**
 * The configuration reference `docs/configuration.md`, generated from the JSON Schema of `edge.yaml`
 * (`edgeConfigJsonSchema`, itself generated from the zod schema): one section per object of the file
 * (`gateway`, `gateway.clients[]`, `nodes[].adapters[]` per adapter type, ...), in schema order, each
 * a table of setting, type, default, range or allowed values, description. `config-reference.spec.ts`
 * fails when the committed file drifts; `npm run docs:config` rewrites it. Not exported from the
 * library's index: only the spec uses it.
 */

/** The part of a JSON Schema (draft 2020-12, as `z.toJSONSchema` emits it) the reference reads. */
export interface JsonSchemaNode {
  type?: string;
  description?: string;
  default?: unknown;
  /** A default in words, for one the schema does not apply itself (`DEFAULT_IN_WORDS`). */
  'x-default'?: string;
  const?: unknown;
  enum?: readonly unknown[];
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  minItems?: number;
  maxItems?: number;
  properties?: Record<string, JsonSchemaNode>;
  required?: readonly string[];
  additionalProperties?: boolean | JsonSchemaNode;
  items?: JsonSchemaNode;
  anyOf?: readonly JsonSchemaNode[];
  oneOf?: readonly JsonSchemaNode[];
}

/** The JSON Schema of `edge.yaml` as the reference reads it (`edgeConfigJsonSchema` is typed as a plain record). */
export function edgeConfigSchemaNode(): JsonSchemaNode {
  return edgeConfigJsonSchema() as JsonSchemaNode;
}

/** One section of the reference: the path of an object in the file (`nodes[].providers[]`), an optional qualifier, the object. */
interface Section {
  path: string;
  /** Which variant of a union, e.g. `type: cli`; empty for a plain object. */
  variant: string;
  node: JsonSchemaNode;
}

/** `z.toJSONSchema`'s bounds of `.int()`: not a range anyone set. */
const SAFE_INTEGER = Number.MAX_SAFE_INTEGER;

const hasProperties = (node: JsonSchemaNode | undefined): node is JsonSchemaNode & { properties: object } =>
  node?.properties !== undefined;
const variantsOf = (node: JsonSchemaNode): readonly JsonSchemaNode[] => node.oneOf ?? node.anyOf ?? [];
const code = (text: string): string => `\`${text}\``;
const join = (parent: string, key: string): string => (parent ? `${parent}.${key}` : key);

/** The heading of a section: `` `nodes[].adapters[]` (type: `cli`) ``, or "Top level" for the file itself. */
function heading(section: Section): string {
  const name = section.path ? code(section.path) : 'Top level';
  return section.variant ? `${name} (${section.variant})` : name;
}

/**
 * GitHub's anchor of a heading (lower case, punctuation but `-` and `_` dropped, spaces as `-`), so a
 * type cell links to the section of a nested object.
 */
export function githubAnchor(headingText: string): string {
  return headingText
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The qualifier of a union variant: its `type` values (`type: ollama, vllm`), else `object form`. */
function variantName(variant: JsonSchemaNode): string {
  const type = variant.properties?.['type'];
  const values = type?.const !== undefined ? [type.const] : (type?.enum ?? []);
  return values.length ? `type: ${values.map((v) => code(String(v))).join(', ')}` : 'object form';
}

/**
 * Every object of the file under `path`, depth first in schema order: the object, then for each of
 * its properties an object, an array of objects, or each object variant of a union. Pure.
 */
function sectionsOf(path: string, variant: string, node: JsonSchemaNode): Section[] {
  const sections: Section[] = [{ path, variant, node }];
  for (const [key, child] of Object.entries(node.properties ?? {})) {
    const childPath = child.type === 'array' ? `${join(path, key)}[]` : join(path, key);
    const target = child.type === 'array' ? child.items : child;
    if (!target) continue;
    if (hasProperties(target)) sections.push(...sectionsOf(childPath, '', target));
    const variants = variantsOf(target).filter(hasProperties);
    for (const v of variants) sections.push(...sectionsOf(childPath, variantName(v), v));
  }
  return sections;
}

/** The sections of `node` a type cell links to, by path (a union's variants listed together). */
function sectionLinks(path: string, node: JsonSchemaNode): string {
  const targets = hasProperties(node) ? [''] : variantsOf(node).filter(hasProperties).map(variantName);
  return targets
    .map((variant) => {
      const text = heading({ path, variant, node });
      return `[${text}](#${githubAnchor(text)})`;
    })
    .join(', ');
}

/** The type cell: `integer`, `string (uri)`, `array of string`, `map of string`, `object` (linked), a union with ` or `. */
function typeOf(node: JsonSchemaNode, path: string): string {
  const variants = variantsOf(node);
  if (variants.length && !hasProperties(node)) {
    if (variants.some(hasProperties)) {
      const plain = variants.filter((v) => !hasProperties(v)).map((v) => typeOf(v, path));
      return [...plain, `object (${sectionLinks(path, node)})`].join(' or ');
    }
    return variants.map((v) => typeOf(v, path)).join(' or ');
  }
  if (node.const !== undefined) return typeof node.const === 'number' ? 'integer' : typeof node.const;
  if (node.type === 'array') return node.items ? `array of ${typeOf(node.items, `${path}[]`)}` : 'array';
  if (node.type === 'object') {
    if (hasProperties(node)) return `object (${sectionLinks(path, node)})`;
    const values = node.additionalProperties;
    return typeof values === 'object' ? `map of ${typeOf(values, path)}` : 'object';
  }
  return node.format ? `${node.type ?? 'any'} (${node.format})` : (node.type ?? 'any');
}

/** A number's bounds in words: `1 to 100`, `≥ 1` (an integer's `> 0`), `≤ 10`; empty when unbounded. */
function numberRange(node: JsonSchemaNode): string {
  const step = node.type === 'integer' ? 1 : 0;
  const low =
    node.exclusiveMinimum !== undefined
      ? step
        ? node.exclusiveMinimum + step
        : undefined
      : node.minimum !== undefined && node.minimum > -SAFE_INTEGER
        ? node.minimum
        : undefined;
  const high =
    node.exclusiveMaximum !== undefined
      ? step
        ? node.exclusiveMaximum - step
        : undefined
      : node.maximum !== undefined && node.maximum < SAFE_INTEGER
        ? node.maximum
        : undefined;
  const parts: string[] = [];
  if (low !== undefined && high !== undefined) parts.push(`${low} to ${high}`);
  else if (low !== undefined) parts.push(`≥ ${low}`);
  else if (high !== undefined) parts.push(`≤ ${high}`);
  if (step === 0 && node.exclusiveMinimum !== undefined) parts.push(`> ${node.exclusiveMinimum}`);
  if (step === 0 && node.exclusiveMaximum !== undefined) parts.push(`< ${node.exclusiveMaximum}`);
  return parts.join(', ');
}

/** The range cell: allowed values (`enum`, `const`), a number's bounds, an array's or a string's length. */
function rangeOf(node: JsonSchemaNode): string {
  if (node.const !== undefined) return code(String(node.const));
  if (node.enum) return node.enum.map((v) => code(String(v))).join(', ');
  if (node.type === 'integer' || node.type === 'number') return numberRange(node);
  if (node.type === 'array') {
    const { minItems: min, maxItems: max } = node;
    const items = (n: number) => `${n} item${n === 1 ? '' : 's'}`;
    if (min !== undefined && max !== undefined) return `${min} to ${items(max)}`;
    if (min !== undefined) return `at least ${items(min)}`;
    if (max !== undefined) return `at most ${items(max)}`;
  }
  if (node.type === 'string' && node.minLength !== undefined && node.minLength > 0) return 'not empty';
  return '';
}

/** The default cell: the schema's `default` as written in YAML, else a default in words, else `required` or `—`. */
function defaultOf(node: JsonSchemaNode, required: boolean): string {
  if (node.default !== undefined) {
    const value = node.default;
    return code(typeof value === 'string' ? value : JSON.stringify(value));
  }
  const inWords = node[DEFAULT_IN_WORDS];
  if (inWords !== undefined) return inWords;
  return required ? 'required' : '—';
}

/** A table cell: one line, `|` escaped. */
const cell = (text: string): string => text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');

function table(section: Section): string {
  const required = new Set(section.node.required ?? []);
  const rows = Object.entries(section.node.properties ?? {}).map(([key, child]) => {
    const columns = [
      code(key),
      typeOf(child, join(section.path, key)),
      defaultOf(child, required.has(key)),
      rangeOf(child),
      child.description ?? '',
    ];
    return `| ${columns.map(cell).join(' | ')} |`;
  });
  return [
    '| Setting | Type | Default | Range / allowed values | Description |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

/** The command that rewrites `docs/configuration.md` (and `libs/validate/edge.schema.json`). */
export const CONFIG_REFERENCE_COMMAND = 'npm run docs:config';

/**
 * The Markdown of `docs/configuration.md` for `schema` (default: the schema of `edge.yaml`): a
 * header, then per section a heading and a table. Deterministic (schema order), ends with a newline. Pure.
 */
export function configReferenceMarkdown(schema: JsonSchemaNode = edgeConfigSchemaNode()): string {
  const sections = sectionsOf('', '', schema);
  const header = [
    '# Configuration reference (`edge.yaml`, version 1)',
    '',
    '<!-- Generated from libs/validate/src/schema.ts by libs/validate/src/config-reference.ts: do not edit. -->',
    `<!-- Regenerate with \`${CONFIG_REFERENCE_COMMAND}\`; config-reference.spec.ts fails when this file drifts. -->`,
    '',
    'Every setting of `edge.yaml`, generated from the zod schema the gateway validates the file with (the',
    'same that gives the JSON Schema [`libs/validate/edge.schema.json`](../libs/validate/edge.schema.json)).',
    'Defaults apply when a key is absent; "required" keys have none. `${VAR}` in any string is read from',
    'the environment. The rules across the file (unique ids, adapter resolution, pooled vs direct models)',
    'and the overview are in README "Configuration".',
  ];
  const body = sections.flatMap((section) => ['', `## ${heading(section)}`, '', table(section)]);
  return `${[...header, ...body].join('\n')}\n`;
}

/** Paths (`gateway.clients[].weight`) of every property of every object in `schema` that has no description. Pure. */
export function settingsWithoutDescription(schema: JsonSchemaNode = edgeConfigSchemaNode()): string[] {
  return sectionsOf('', '', schema).flatMap((section) =>
    Object.entries(section.node.properties ?? {})
      .filter(([, child]) => !child.description?.trim())
      .map(([key]) => `${join(section.path, key)}${section.variant ? ` (${section.variant})` : ''}`),
  );
}
