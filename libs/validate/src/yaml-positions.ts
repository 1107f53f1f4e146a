import { isAlias, isMap, isScalar, isSeq, type Document, type LineCounter } from 'yaml';
import type { PathSegments } from './config-problem';

/**
 * 1-based line and column of the YAML node at `segments`, or of its nearest existing parent
 * (a missing key points at the map that should hold it). With `at: 'key'` the last segment
 * points at the key itself, which is where an unknown key is reported. 1:1 for an empty file.
 */
export function positionOf(
  doc: Document,
  lineCounter: LineCounter,
  segments: PathSegments,
  at: 'value' | 'key' = 'value',
): { line: number; column: number } {
  let node: unknown = doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (const [i, segment] of segments.entries()) {
    if (isAlias(node)) node = node.resolve(doc);
    if (isMap(node)) {
      const pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value) : p.key) === String(segment));
      if (!pair) break;
      node = at === 'key' && i === segments.length - 1 ? pair.key : (pair.value ?? pair.key);
    } else if (isSeq(node) && typeof segment === 'number' && segment < node.items.length) {
      node = node.items[segment];
    } else break;
    const start = rangeStart(node);
    if (start === undefined) break;
    offset = start;
  }
  const { line, col } = lineCounter.linePos(offset);
  return { line, column: col };
}

function rangeStart(node: unknown): number | undefined {
  const range = (node as { range?: [number, number, number] } | null)?.range;
  return range?.[0];
}
