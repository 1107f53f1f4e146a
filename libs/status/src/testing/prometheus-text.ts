/** One sample of a Prometheus text document. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
const VALUE = '(?:[+-]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][+-]?\\d+)?|[+-]Inf|NaN)';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,(?:${LABEL}))*,?)?\\})? (${VALUE})(?: -?\\d+)?$`);
const HELP = new RegExp(`^# HELP (${NAME}) .*$`);
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const ONE_LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"/g;

/**
 * Parses Prometheus text exposition format 0.0.4 strictly: every non-empty line must be a
 * `# HELP`, a `# TYPE` or a sample line, and every sample's family must have been TYPEd before it.
 * @throws Error naming the first line that does not parse.
 */
export function parsePrometheusText(text: string): PromSample[] {
  const samples: PromSample[] = [];
  const typed = new Map<string, string>();
  text.split('\n').forEach((line, i) => {
    if (line === '') return;
    const type = TYPE.exec(line);
    if (type) {
      typed.set(type[1], type[2]);
      return;
    }
    if (HELP.test(line)) return;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`line ${i + 1} is not Prometheus text: ${JSON.stringify(line)}`);
    const family = [...typed.keys()].find(
      (f) =>
        m[1] === f ||
        (typed.get(f) === 'histogram' && /^_(bucket|sum|count)$/.test(m[1].slice(f.length)) && m[1].startsWith(f)),
    );
    if (!family) throw new Error(`line ${i + 1}: sample ${m[1]} has no # TYPE line before it`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(ONE_LABEL))
      labels[k] = v.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    samples.push({ name: m[1], labels, value: Number(m[3].replace(/^\+/, '')) });
  });
  return samples;
}

/** The value of the one sample named `name` whose labels include `labels`, or undefined. */
export function sampleValue(
  samples: readonly PromSample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}
