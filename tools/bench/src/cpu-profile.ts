import { fileURLToPath } from 'node:url';
import { BundleLocator } from './bundle-locator';

/** The parts of a V8 `.cpuprofile` (written by `node --cpu-prof`) that the summary reads. */
export interface CpuProfile {
  nodes: CpuProfileNode[];
  /** Node id of each sample, in time order. */
  samples: number[];
  /** µs between consecutive samples (the first is from `startTime`). */
  timeDeltas: number[];
}

export interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}

/** Time spent in one function or category. */
export interface HotSpot {
  /** `file:line function`; gateway code is named by its source file and line (through the bundle's source map). */
  where: string;
  category: string;
  /** Self time, ms. */
  selfMs: number;
  /** Self time as a share of busy time (everything but idle), 0..1. */
  selfShare: number;
  /** Time with everything it called, ms. */
  totalMs: number;
  totalShare: number;
}

/** Where a gateway process spent its CPU under load. */
export interface ProfileSummary {
  /** Profiled wall time, ms. */
  wallMs: number;
  /** Wall time not idle, ms: the base of every share. */
  busyMs: number;
  /** Self time by category: gateway code, each npm package, node core, native, GC. */
  categories: Array<{ category: string; selfMs: number; selfShare: number }>;
  /** The hottest functions anywhere, by self time. */
  top: HotSpot[];
  /** The gateway's own functions, by self time. */
  gatewayBySelf: HotSpot[];
  /** The gateway's own functions, by time including their callees. */
  gatewayByTotal: HotSpot[];
}

/** Category of the gateway's own (bundled) code. */
export const GATEWAY_CATEGORY = 'gateway code';

const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);

/**
 * Summarises a CPU profile of the gateway. `isGatewayBundle(url)` tells which script is the
 * gateway's own bundle; its frames are named by source file and line through `BundleLocator`.
 * `skipFirstMs` leaves out the start of the profile (module loading, JIT warm-up).
 */
export function summarizeProfile(
  profile: CpuProfile,
  isGatewayBundle: (url: string) => boolean,
  opts: { limit?: number; skipFirstMs?: number } = {},
): ProfileSummary {
  const limit = opts.limit ?? 12;
  const skipUs = (opts.skipFirstMs ?? 0) * 1000;
  const byId = new Map<number, CpuProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const bundles = new Map<string, BundleLocator>();
  const describe = (node: CpuProfileNode): { where: string; category: string } => {
    const { functionName, url, lineNumber, columnNumber } = node.callFrame;
    const name = functionName || '(anonymous)';
    if (!url) return { where: name, category: SPECIAL.has(name) ? name : 'native (V8 builtins, bindings)' };
    const at = `:${lineNumber + 1} ${name}`;
    if (url.startsWith('node:')) return { where: `${url}${at}`, category: 'node core' };
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(url);
    if (pkg) return { where: `${pkg[1]}/${pkg[2]}${at}`, category: `npm ${pkg[1]}` };
    if (isGatewayBundle(url)) {
      let locator = bundles.get(url);
      if (!locator) {
        locator = new BundleLocator(url.startsWith('file:') ? fileURLToPath(url) : url);
        bundles.set(url, locator);
      }
      const source = locator.locate(lineNumber, columnNumber);
      const where = source ? `${source.file}${source.line ? `:${source.line}` : ''} ${name}` : `gateway bundle${at}`;
      return { where, category: GATEWAY_CATEGORY };
    }
    return { where: `${url}${at}`, category: 'other' };
  };

  const described = new Map<number, { where: string; category: string }>();
  const info = (id: number) => {
    let d = described.get(id);
    if (!d) {
      const node = byId.get(id);
      d = node ? describe(node) : { where: '(unknown)', category: 'other' };
      described.set(id, d);
    }
    return d;
  };

  const self = new Map<string, { category: string; us: number }>();
  const total = new Map<string, number>();
  const categories = new Map<string, number>();
  let wallUs = 0;
  let idleUs = 0;
  let elapsedUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    elapsedUs += profile.timeDeltas[i] ?? 0;
    if (elapsedUs < skipUs) continue;
    // A sample lasts until the next one (as DevTools counts it); the last gets the previous interval.
    const us = profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0;
    wallUs += us;
    const leaf = info(profile.samples[i]);
    if (leaf.category === '(idle)') {
      idleUs += us;
      continue;
    }
    const entry = self.get(leaf.where) ?? { category: leaf.category, us: 0 };
    entry.us += us;
    self.set(leaf.where, entry);
    categories.set(leaf.category, (categories.get(leaf.category) ?? 0) + us);
    const seen = new Set<string>();
    for (let id: number | undefined = profile.samples[i]; id !== undefined; id = parent.get(id)) {
      const where = info(id).where;
      if (seen.has(where)) continue;
      seen.add(where);
      total.set(where, (total.get(where) ?? 0) + us);
    }
  }
  const busyUs = Math.max(1, wallUs - idleUs);
  const spots: HotSpot[] = [...self.entries()].map(([where, { category, us }]) => ({
    where,
    category,
    selfMs: us / 1000,
    selfShare: us / busyUs,
    totalMs: (total.get(where) ?? us) / 1000,
    totalShare: (total.get(where) ?? us) / busyUs,
  }));
  const gatewayWheres = new Set(
    [...described.values()].filter((d) => d.category === GATEWAY_CATEGORY).map((d) => d.where),
  );
  const gatewayTotals: HotSpot[] = [...total.entries()]
    .filter(([where]) => gatewayWheres.has(where))
    .map(([where, us]) => {
      const s = self.get(where)?.us ?? 0;
      return {
        where,
        category: GATEWAY_CATEGORY,
        selfMs: s / 1000,
        selfShare: s / busyUs,
        totalMs: us / 1000,
        totalShare: us / busyUs,
      };
    });
  return {
    wallMs: wallUs / 1000,
    busyMs: busyUs / 1000,
    categories: [...categories.entries()]
      .map(([category, us]) => ({ category, selfMs: us / 1000, selfShare: us / busyUs }))
      .sort((a, b) => b.selfMs - a.selfMs),
    top: [...spots].sort((a, b) => b.selfMs - a.selfMs).slice(0, limit),
    gatewayBySelf: spots
      .filter((s) => s.category === GATEWAY_CATEGORY)
      .sort((a, b) => b.selfMs - a.selfMs)
      .slice(0, limit),
    gatewayByTotal: gatewayTotals.sort((a, b) => b.totalMs - a.totalMs).slice(0, limit),
  };
}
