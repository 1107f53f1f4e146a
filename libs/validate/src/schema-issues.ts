import type { z } from 'zod';
import { closestName } from './closest-name';
import type { PathSegments } from './config-problem';

/** A schema problem, positioned later by the loader; `at: 'key'` reports at the key (unknown keys). */
export interface SchemaProblem {
  segments: PathSegments;
  at: 'value' | 'key';
  message: string;
  fix: string;
}

/**
 * Marker message for issues whose schema has no custom error: pass `{ error: () => DEFAULT_MESSAGE }`
 * to `safeParse` so {@link describeIssues} can tell a schema's own hint (used as the fix) from zod's default.
 */
export const DEFAULT_MESSAGE = '\u0000default';

/**
 * Turns zod issues into problems with a path, a plain message and a fix sentence. Never quotes the
 * input value (it may hold an interpolated secret); it names keys, expected types and allowed values.
 * `data` is the parsed input, used to tell a missing key from a wrong one and to list allowed keys.
 */
export function describeIssues(issues: readonly z.core.$ZodIssue[], schema: z.ZodType, data: unknown): SchemaProblem[] {
  return issues.flatMap((issue) => describeIssue(issue, [], schema, data));
}

function describeIssue(
  issue: z.core.$ZodIssue,
  prefix: PathSegments,
  schema: z.ZodType,
  data: unknown,
): SchemaProblem[] {
  const segments = [...prefix, ...issue.path.map((s) => (typeof s === 'number' ? s : String(s)))];
  const hint = issue.message === DEFAULT_MESSAGE ? undefined : sentence(issue.message);
  const problem = (message: string, fix: string): SchemaProblem[] => [
    { segments, at: 'value', message, fix: hint ?? sentence(fix) },
  ];
  const key = segments.at(-1);
  const missing = (): SchemaProblem[] => [
    {
      segments,
      at: 'value',
      message: `required key "${key}" is missing`,
      fix: `add ${key}${hint ? ` (${hint.slice(0, -1)})` : ''}.`,
    },
  ];
  switch (issue.code) {
    case 'unrecognized_keys': {
      const allowed = allowedKeys(schema, segments, data);
      return issue.keys.map((unknown) => {
        const guess = closestName(unknown, allowed);
        return {
          segments: [...segments, unknown],
          at: 'key' as const,
          message: `unknown key "${unknown}"`,
          fix: guess
            ? `did you mean "${guess}"? Allowed keys here: ${allowed.join(', ')}.`
            : `remove it or use one of the allowed keys here: ${allowed.join(', ')}.`,
        };
      });
    }
    case 'invalid_type':
      if (valueAt(data, segments) === undefined) return missing();
      return problem(
        `expected ${describeType(issue.expected)}, got ${describeValue(valueAt(data, segments))}`,
        `write ${describeType(issue.expected)} here.`,
      );
    case 'invalid_value':
      return problem(
        issue.values.length === 1
          ? `must be ${JSON.stringify(issue.values[0])}`
          : `must be one of: ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`,
        `use ${issue.values.length === 1 ? '' : 'one of: '}${issue.values.join(', ')}.`,
      );
    case 'invalid_format':
      return issue.format === 'regex'
        ? problem('has the wrong format', `match the pattern ${issue.pattern}.`)
        : problem(
            `is not a valid ${issue.format === 'url' ? 'URL' : issue.format}`,
            `write a valid ${issue.format === 'url' ? 'URL' : issue.format}.`,
          );
    case 'too_small':
    case 'too_big': {
      const small = issue.code === 'too_small';
      const limit = Number(small ? issue.minimum : issue.maximum);
      const items = `${limit} item${limit === 1 ? '' : 's'}`;
      if (issue.origin === 'array')
        return problem(
          `needs ${small ? 'at least' : 'at most'} ${items}`,
          `list ${small ? 'at least' : 'at most'} ${items}.`,
        );
      if (issue.origin === 'string')
        return small && limit === 1
          ? problem('cannot be empty', 'write a non-empty value.')
          : problem(`is too ${small ? 'short' : 'long'}`, `use ${small ? 'at least' : 'at most'} ${limit} characters.`);
      const bound = `${small ? (issue.inclusive ? 'at least' : 'greater than') : issue.inclusive ? 'at most' : 'less than'} ${limit}`;
      // "use 0 or more", "use a number greater than 0": never "a number at least 0".
      const fix = issue.inclusive ? `use ${limit} or ${small ? 'more' : 'less'}` : `use a number ${bound}`;
      return problem(`must be ${bound}`, `${fix}.`);
    }
    case 'invalid_union': {
      if (valueAt(data, segments) === undefined) return missing();
      // A branch whose issues all sit below this node matched the shape: report its inner problems.
      const inner = issue.errors.find((branch) => branch.length > 0 && branch.every((i) => i.path.length > 0));
      if (inner) return inner.flatMap((i) => describeIssue(i, segments, schema, data));
      if (issue.errors.length === 0)
        return problem('is not one of the allowed values', 'see the schema (edge.schema.json) for the allowed values.');
      return problem('matches none of the allowed forms', 'see the schema (edge.schema.json) for the allowed forms.');
    }
    default:
      return problem('is not valid', 'see the schema (edge.schema.json) for the allowed values.');
  }
}

/** Capitalisation untouched; ensures a fix reads as one sentence ending with a period. */
function sentence(text: string): string {
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

function valueAt(data: unknown, segments: PathSegments): unknown {
  return segments.reduce<unknown>(
    (value, segment) =>
      value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[segment] : undefined,
    data,
  );
}

function describeType(expected: string): string {
  const names: Record<string, string> = {
    array: 'a list',
    object: 'a map',
    int: 'an integer',
    number: 'a number',
    string: 'a string',
    boolean: 'true or false',
  };
  return names[expected] ?? expected;
}

function describeValue(value: unknown): string {
  if (value === null) return 'nothing (null)';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a map';
  // YAML's .nan and .inf (YAML 1.2, "Core Schema") are numbers to the parser but not to a setting.
  if (Number.isNaN(value)) return 'not a number (.nan)';
  if (value === Infinity) return 'infinity (.inf)';
  if (value === -Infinity) return 'minus infinity (-.inf)';
  if (typeof value === 'number' && !Number.isInteger(value)) return 'a fractional number';
  return `a ${typeof value}`;
}

/** The structural bits of a zod 4 schema definition that key listing needs. */
interface SchemaDef {
  type: string;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  innerType?: z.ZodType;
  options?: z.ZodType[];
}
const defOf = (schema: z.ZodType) => schema.def as unknown as SchemaDef;

/** Keys allowed in the object at `segments`; for a union the branch matching the data's `type`. */
function allowedKeys(schema: z.ZodType, segments: PathSegments, data: unknown): string[] {
  let schemas = [schema];
  let value = data;
  for (const segment of segments) {
    schemas = schemas
      .flatMap((s) => containers(s, value))
      .flatMap((s) => {
        const def = defOf(s);
        if (def.type === 'array' && typeof segment === 'number' && def.element) return [def.element];
        if (def.type === 'object' && typeof segment === 'string' && def.shape?.[segment]) return [def.shape[segment]];
        return [];
      });
    value = valueAt(value, [segment]);
  }
  const keys = schemas.flatMap((s) => containers(s, value)).flatMap((s) => Object.keys(defOf(s).shape ?? {}));
  return [...new Set(keys)];
}

/** Unwraps defaults, optionals and unions down to the object/array schemas that could hold `value`. */
function containers(schema: z.ZodType, value: unknown): z.ZodType[] {
  const def = defOf(schema);
  if (def.innerType) return containers(def.innerType, value);
  if (def.type !== 'union' || !def.options) return [schema];
  const options = def.options.flatMap((o) => containers(o, value));
  const discriminated = options.filter((o) => {
    const type = defOf(o).shape?.type;
    return (
      type && value !== null && typeof value === 'object' && type.safeParse((value as { type?: unknown }).type).success
    );
  });
  return discriminated.length > 0 ? discriminated : options;
}
