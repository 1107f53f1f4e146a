import type { PathSegments } from './config-problem';
import { matchesSetting, type SettingPattern } from './secret-settings';

/** A problem found while interpolating, positioned later by the loader. */
export interface InterpolationProblem {
  segments: PathSegments;
  message: string;
  fix: string;
}

/** Result of {@link interpolateEnv}: the substituted data, its problems and the values that must never be printed. */
export interface Interpolated {
  value: unknown;
  problems: InterpolationProblem[];
  /** Every non-empty value substituted from `env`: treated as secrets and scrubbed from error text. */
  secrets: Set<string>;
}

const REFERENCE = /\$(\$?)\{([^}]*)\}/g;
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Replaces `${VAR}` in every string value (never in keys) with `env.VAR` (docs/architecture.md, "Settings"). `$${VAR}`
 * is an escape for a literal `${VAR}`. An unset variable (`undefined`; an empty string counts as
 * set) or a malformed reference is a problem naming the variable and the path where it is used.
 * Substituted values are always strings. An unset variable in a setting of `unsetAllowedAt` is
 * kept as written (`${NAME}`) instead: a setting this process never reads. Pure; never throws.
 */
export function interpolateEnv(
  data: unknown,
  env: Record<string, string | undefined>,
  unsetAllowedAt: readonly SettingPattern[] = [],
): Interpolated {
  const problems: InterpolationProblem[] = [];
  const secrets = new Set<string>();
  const visit = (value: unknown, segments: PathSegments): unknown => {
    if (Array.isArray(value)) return value.map((item, i) => visit(item, [...segments, i]));
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, visit(item, [...segments, key])]));
    }
    if (typeof value !== 'string') return value;
    return value.replace(REFERENCE, (reference, escaped: string, name: string) => {
      if (escaped) return reference.slice(1);
      if (!VARIABLE_NAME.test(name)) {
        problems.push({
          segments,
          message: `"\${${name}}" is not a valid environment variable reference`,
          fix: 'use ${NAME} with letters, digits and "_" (not starting with a digit), or write $${ for a literal "${".',
        });
        return reference;
      }
      const substituted = env[name];
      if (substituted === undefined) {
        if (matchesSetting(unsetAllowedAt, segments)) return reference;
        problems.push({
          segments,
          message: `environment variable ${name} is not set`,
          fix: `set ${name} in the environment of the process, or replace \${${name}} in the file.`,
        });
        return reference;
      }
      if (substituted) secrets.add(substituted);
      return substituted;
    });
  };
  return { value: visit(data, []), problems, secrets };
}
