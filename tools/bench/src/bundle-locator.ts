import { existsSync, readFileSync } from 'node:fs';

/** A place in the source that a bundle was built from. */
export interface SourceLocation {
  /** Path as the bundler wrote it, relative to the workspace root (e.g. `apps/edge-gateway/src/app.ts`). */
  file: string;
  /** 1-based source line, when the bundle has a source map. */
  line?: number;
}

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const BASE64_VALUE = new Map([...BASE64].map((c, i) => [c, i]));

/** One decoded mapping segment: generated column → source index, line, column (all 0-based). */
type Segment = [genColumn: number, source: number, line: number, column: number];

/**
 * Decodes the `mappings` of a source map v3 into segments per generated line (Base64 VLQ, fields
 * relative to the previous segment; the generated column restarts on each line).
 */
export function decodeMappings(mappings: string): Segment[][] {
  const lines: Segment[][] = [];
  let source = 0;
  let line = 0;
  let column = 0;
  for (const lineText of mappings.split(';')) {
    const segments: Segment[] = [];
    let genColumn = 0;
    for (const segText of lineText.split(',')) {
      if (!segText) continue;
      const fields: number[] = [];
      let value = 0;
      let shift = 0;
      for (const ch of segText) {
        const digit = BASE64_VALUE.get(ch);
        if (digit === undefined) throw new Error(`bad base64 "${ch}" in source map`);
        value += (digit & 31) << shift;
        if (digit & 32) shift += 5;
        else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = 0;
          shift = 0;
        }
      }
      genColumn += fields[0];
      if (fields.length >= 4) {
        source += fields[1];
        line += fields[2];
        column += fields[3];
        segments.push([genColumn, source, line, column]);
      }
    }
    lines.push(segments);
  }
  return lines;
}

/**
 * Maps positions in an esbuild bundle back to source files: through the bundle's `.map` file when
 * there is one, else through the module comments of an unminified esbuild bundle (each module
 * starts with `// apps/edge-gateway/src/app.ts`; a line belongs to the last one above it).
 */
export class BundleLocator {
  private readonly markers: Array<{ line: number; file: string }> = [];
  private readonly segments: Segment[][] | undefined;
  private readonly sources: string[] = [];

  constructor(bundleFile: string) {
    const lines = readFileSync(bundleFile, 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      const match = /^\/\/ ((?:apps|libs|tools)\/\S+\.ts)$/.exec(lines[i]);
      if (match) this.markers.push({ line: i, file: match[1] });
    }
    const mapFile = `${bundleFile}.map`;
    if (existsSync(mapFile)) {
      const map = JSON.parse(readFileSync(mapFile, 'utf8')) as { sources?: string[]; mappings?: string };
      if (map.sources && map.mappings) {
        this.sources = map.sources.map((s) => s.replace(/^(\.\.\/)+/, ''));
        this.segments = decodeMappings(map.mappings);
      }
    }
  }

  /** Source of 0-based bundle `line` and `column`, or undefined outside any module. */
  locate(line: number, column: number): SourceLocation | undefined {
    const segs = this.segments?.[line];
    if (segs && segs.length) {
      let best: Segment | undefined;
      for (const seg of segs) {
        if (seg[0] <= column) best = seg;
        else break;
      }
      best ??= segs[0];
      return { file: this.sources[best[1]] ?? '?', line: best[2] + 1 };
    }
    return this.markerAt(line);
  }

  private markerAt(line: number): SourceLocation | undefined {
    let lo = 0;
    let hi = this.markers.length - 1;
    let found: string | undefined;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.markers[mid].line <= line) {
        found = this.markers[mid].file;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found ? { file: found } : undefined;
  }
}
