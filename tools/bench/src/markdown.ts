import type { Spread } from './stats';

/** `12.3 (11.9–12.8)`: the median and the range over rounds, or `—` when nothing was measured. */
export function fmtSpread(s: Spread | undefined, digits: number, signed = false): string {
  if (!s || s.n === 0) return '—';
  const f = (v: number) => (signed && v > 0 ? '+' : '') + v.toFixed(digits);
  return s.n === 1 ? f(s.median) : `${f(s.median)} (${f(s.min)}…${f(s.max)})`;
}

/** A markdown table. */
export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}
