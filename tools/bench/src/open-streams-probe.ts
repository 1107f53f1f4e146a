import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import type { ServiceProcess } from './service-process';
import { probeStream } from './stream-probe';

/** Holds many streams open through a server and watches its memory. */
export interface OpenStreamsSpec {
  urls: string[];
  headers: Record<string, string>;
  /** A streaming request body that lasts far longer than the measurement (a long `chunk_gap_ms`). */
  body: string;
  /** Streams to hold open at once, e.g. 1000. */
  streams: number;
  /** The processes whose memory is read (all replicas of a target). */
  processes: ServiceProcess[];
  /** Longest wait for every stream to deliver its first content event, in ms. */
  openTimeoutMs: number;
  /** How long to keep sampling once every stream is open, in ms. */
  holdMs: number;
}

/** Memory of a server while it held `opened` streams. Bytes; summed over the target's processes. */
export interface OpenStreamsResult {
  /** Streams that delivered a first content event before the deadline. */
  opened: number;
  /** Streams that failed before they opened (status, connection error). */
  failed: number;
  /** ms from the first request until the last stream opened (NaN if not all opened). */
  openMs: number;
  /** Resident set before the streams (warm, idle). */
  idleRss: number;
  /** Highest resident set sampled (every 25 ms) while opening and holding the streams. */
  sampledPeakRss: number;
  /** `VmHWM` at the end: the kernel's peak resident set since the process started. */
  peakRss: number;
  /** The first error seen, when some stream failed. */
  firstError?: string;
}

/**
 * Opens `streams` concurrent streams (one connection each), waits until all delivered content,
 * holds them for `holdMs` while sampling VmRSS, reads VmHWM, then aborts them all. The servers
 * should be fresh processes, so VmHWM is not a peak left over from an earlier load.
 */
export async function probeOpenStreams(spec: OpenStreamsSpec): Promise<OpenStreamsResult> {
  const readRss = () => spec.processes.reduce((sum, p) => sum + p.memory().rss, 0);
  const idleRss = readRss();
  let sampledPeakRss = idleRss;
  const sampler = setInterval(() => {
    try {
      sampledPeakRss = Math.max(sampledPeakRss, readRss());
    } catch {
      // a process that died shows up as failed streams
    }
  }, 25);
  const agent = new Agent({ connections: null, pipelining: 1, keepAliveTimeout: 30_000 });
  const abort = new AbortController();
  // Every stream listens on this one signal.
  setMaxListeners(spec.streams + 10, abort.signal);
  let opened = 0;
  let failed = 0;
  let firstError: string | undefined;
  const start = performance.now();
  let allOpen: () => void = () => undefined;
  const allOpened = new Promise<void>((resolve) => (allOpen = resolve));
  const settled = Array.from({ length: spec.streams }, (_, i) =>
    probeStream({
      url: spec.urls[i % spec.urls.length],
      headers: spec.headers,
      body: spec.body,
      dispatcher: agent,
      signal: abort.signal,
      onFirstContent: () => {
        if (++opened === spec.streams) allOpen();
      },
    }).catch((err: unknown) => {
      if (abort.signal.aborted) return;
      failed++;
      firstError ??= err instanceof Error ? err.message : String(err);
      if (opened + failed === spec.streams) allOpen();
    }),
  );
  const stopWaiting = new AbortController();
  const deadline = sleep(spec.openTimeoutMs, 'timeout' as const, { signal: stopWaiting.signal }).catch(
    () => 'timeout' as const,
  );
  const outcome = await Promise.race([allOpened.then(() => 'open' as const), deadline]);
  stopWaiting.abort();
  const openMs = outcome === 'open' && opened === spec.streams ? performance.now() - start : NaN;
  await sleep(spec.holdMs);
  clearInterval(sampler);
  const peakRss = spec.processes.reduce((sum, p) => sum + p.memory().peakRss, 0);
  sampledPeakRss = Math.max(sampledPeakRss, readRss());
  abort.abort();
  await Promise.allSettled(settled);
  await agent.destroy();
  return { opened, failed, openMs, idleRss, sampledPeakRss, peakRss, firstError };
}
