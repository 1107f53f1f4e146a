import { readdir, readFile } from 'node:fs/promises';

/** Passes over `/proc`: a process found in one pass may have forked before it was killed. */
const MAX_PASSES = 3;
/** `/proc/<pid>/environ` files read at once. */
const BATCH = 64;

/**
 * Kills (`SIGKILL`) every process whose environment holds `name=value`, and the process group it
 * leads, if it leads one (README "Adapters": what a CLI program starts never outlives its run).
 * A process that left the run's process group with `setsid` keeps the environment it inherited,
 * so this finds it wherever it went, even re-parented to PID 1.
 * Where it cannot work (documented limits): no `/proc` (not Linux: only the process group is
 * killed); a process that cleared or replaced its environment (`env -i`, an `execve` with a new
 * one); a process of another user (its `environ` is not readable).
 * @returns how many processes were killed; never rejects.
 */
export async function killMarkedProcesses(name: string, value: string): Promise<number> {
  const needle = Buffer.from(`\0${name}=${value}\0`);
  let killed = 0;
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    let entries: string[];
    try {
      entries = await readdir('/proc');
    } catch {
      return killed;
    }
    let found = 0;
    const check = async (entry: string) => {
      const pid = Number(entry);
      if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) return;
      let environ: Buffer;
      try {
        environ = await readFile(`/proc/${pid}/environ`);
      } catch {
        return; // gone, or not ours to read
      }
      if (!Buffer.concat([Buffer.from([0]), environ]).includes(needle)) return;
      found++;
      for (const target of [-pid, pid]) {
        try {
          process.kill(target, 'SIGKILL');
        } catch {
          // ESRCH: not a group leader, or already gone.
        }
      }
    };
    // A bounded number of files open at once.
    for (let i = 0; i < entries.length; i += BATCH) await Promise.all(entries.slice(i, i + BATCH).map(check));
    killed += found;
    if (found === 0) break;
  }
  return killed;
}
