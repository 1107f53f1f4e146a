import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildSync } from 'esbuild';
import type { JournalCall } from '@iop/fake-upstream';
import type { MeterCounts, Overlap } from './upstream-meter';

/** A question to the upstream process, without its `id`. */
type UpstreamQuestion = { op: 'read' } | { op: 'calls' } | { op: 'reset'; t0: number } | { op: 'close' };

/** A question to the upstream process (`upstream-process.ts`); `id` pairs it with its reply. */
export type UpstreamRequest = { id: number } & UpstreamQuestion;

/** A reply of the upstream process: the url once listening (id 0), what `read` asked for, or an ack. */
export interface UpstreamReply {
  id: number;
  url?: string;
  counts?: MeterCounts;
  overlaps?: Overlap[];
  /** The fake upstream's own most-at-once per upstream model. */
  fakeMax?: Record<string, number>;
  /** What `calls` asked for: the fake upstream's call journal. */
  calls?: JournalCall[];
}

/** What the meter and the fake upstream behind it saw, read at one moment. */
export interface UpstreamReading {
  counts: MeterCounts;
  overlaps: Overlap[];
  fakeMax: Record<string, number>;
}

/** The chaos run's upstream in its own process: the meter's URL (`/v1`), its readings, reset and close. */
export interface UpstreamChild {
  url: string;
  read(): Promise<UpstreamReading>;
  /**
   * The fake upstream's call journal (each call's upstream model, `tag` knob, `startedAt` and `endedAt`
   * in `Date.now()` ms of this host); empty unless started with `journal: true`. `reset` empties it.
   */
  calls(): Promise<JournalCall[]>;
  /** Zeroes the maxima and overlaps; overlaps' `at` count from `t0` (ms since the epoch) on. */
  reset(t0: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Bundles `upstream-process.ts` with esbuild (workspace paths from tsconfig.base.json) and forks it:
 * the fake upstream behind the meter, on an event loop the test's clients do not share.
 * `limits` is {@link startMeter}'s table (upstream model → provider id and limit); `journal` keeps the
 * fake upstream's call journal ({@link UpstreamChild.calls}), which grows by one entry per call.
 * @throws Error when the bundle fails or the process exits before it listens.
 */
export async function startUpstreamChild(
  limits: Record<string, { provider: string; limit: number }>,
  opts: { journal?: boolean } = {},
): Promise<UpstreamChild> {
  const root = path.join(__dirname, '../../../..');
  const dir = mkdtempSync(path.join(tmpdir(), 'iop-chaos-upstream-'));
  const outfile = path.join(dir, 'upstream-process.js');
  buildSync({
    entryPoints: [path.join(__dirname, 'upstream-process.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    outfile,
    tsconfig: path.join(root, 'tsconfig.base.json'),
    logLevel: 'error',
  });
  const child: ChildProcess = fork(outfile, [JSON.stringify(limits), opts.journal === true ? 'journal' : ''], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, (reply: UpstreamReply) => void>();
  let exited: Error | undefined;
  const url = await new Promise<string>((resolve, reject) => {
    child.on('message', (reply: UpstreamReply) => {
      if (reply.id === 0 && reply.url) resolve(reply.url);
      waiting.get(reply.id)?.(reply);
      waiting.delete(reply.id);
    });
    child.once('exit', (code) => {
      exited = new Error(`the chaos upstream process exited (${code})`);
      reject(exited);
      for (const settle of waiting.values()) settle({ id: -1 });
    });
  });
  let nextId = 1;
  const ask = (req: UpstreamQuestion) =>
    new Promise<UpstreamReply>((resolve, reject) => {
      if (exited) return reject(exited);
      const id = nextId++;
      waiting.set(id, (reply) => (reply.id === -1 ? reject(exited) : resolve(reply)));
      child.send({ id, ...req });
    });
  return {
    url,
    read: async () => {
      const reply = await ask({ op: 'read' });
      return { counts: reply.counts ?? {}, overlaps: reply.overlaps ?? [], fakeMax: reply.fakeMax ?? {} };
    },
    calls: async () => (await ask({ op: 'calls' })).calls ?? [],
    reset: async (t0) => void (await ask({ op: 'reset', t0 })),
    close: async () => {
      if (!exited) await ask({ op: 'close' }).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
