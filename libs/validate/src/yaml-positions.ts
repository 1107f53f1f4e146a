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

/**
 * The path of the key or value at `offset` (a character offset into the text, as the YAML library
 * reports an error's position), descending through maps and sequences whose range holds it:
 * `['gateway', 'clients', 0, 'priority']` for a duplicate key `priority` in the first client. A
 * map's keys count only when they are scalars. `undefined` when no node of the document holds
 * `offset` (the top level itself).
 */
export function pathAt(doc: Document, offset: number): PathSegments | undefined {
  const path: Array<string | number> = [];
  let node: unknown = doc.contents;
  for (;;) {
    if (isMap(node)) {
      const pair = node.items.find((p) => holds(p.key, offset) || holds(p.value, offset));
      if (!pair || !isScalar(pair.key)) break;
      path.push(String(pair.key.value));
      if (holds(pair.key, offset)) return path;
      node = pair.value;
    } else if (isSeq(node)) {
      const index = node.items.findIndex((item) => holds(item, offset));
      if (index === -1) break;
      path.push(index);
      node = node.items[index];
    } else break;
  }
  return path.length > 0 ? path : undefined;
}

/** True when `node`'s range (start to end of its value) holds `offset`. */
function holds(node: unknown, offset: number): boolean {
  const range = (node as { range?: [number, number, number] } | null)?.range;
  return range !== undefined && offset >= range[0] && offset < range[1];
}
