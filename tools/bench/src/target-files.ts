import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Files the benchmark runs, all resolved from the workspace root. */
export interface BenchPaths {
  root: string;
  /** Built gateway, `dist/apps/edge-gateway/main.js`. */
  gatewayMain: string;
  /** Built fake upstream, `dist/tools/fake-upstream/main.js`. */
  upstreamMain: string;
  /** `loopback-preload.js`, next to the bench's own bundle. */
  preload: string;
  /** `bare-proxy.js` (the `node-floor` target), next to the bench's own bundle. */
  bareProxy: string;
  /** `express-floor.js` (the `express-floor` target), next to the bench's own bundle. */
  expressFloor: string;
  /** Scratch directory of this run (configs, CPU profiles). */
  workDir: string;
}

/** The first of `candidates` that exists (nx's esbuild names a CJS bundle `.js` or `.cjs` depending on options). */
export function firstExisting(candidates: readonly string[]): string | undefined {
  return candidates.find((c) => existsSync(c));
}

/** Resolves Portkey's server entry from its package.json `bin`. @throws Error when it is not installed. */
export function portkeyEntry(root: string): { entry: string; version: string } {
  const dir = path.join(root, 'node_modules/@portkey-ai/gateway');
  const pkgFile = path.join(dir, 'package.json');
  if (!existsSync(pkgFile))
    throw new Error('@portkey-ai/gateway is not installed (npm ci installs it as a devDependency)');
  const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { version?: string; bin?: string | Record<string, string> };
  const bin = typeof pkg.bin === 'string' ? pkg.bin : Object.values(pkg.bin ?? {})[0];
  if (!bin) throw new Error('@portkey-ai/gateway has no bin entry');
  return { entry: path.join(dir, bin), version: pkg.version ?? 'unknown' };
}

/** Portkey's routing headers for an OpenAI-compatible upstream at `upstreamV1`. */
export function portkeyHeaders(upstreamV1: string): Record<string, string> {
  return {
    'x-portkey-provider': 'openai',
    'x-portkey-custom-host': upstreamV1,
    // Portkey drops unknown body fields; the fake upstream's stream knobs travel as headers instead.
    'x-portkey-forward-headers': 'x-fake-chunks,x-fake-chunk-gap-ms',
  };
}
