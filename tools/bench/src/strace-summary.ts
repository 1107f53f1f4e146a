/**
 * Reading the table `strace -c` writes (strace(1), `-c`: "Count time, calls, and errors for each
 * system call and report a summary"): a header `% time seconds usecs/call calls errors syscall`, a
 * dashed rule, one line per syscall (`errors` blank when there were none), a rule and a `total` line.
 */

/** One syscall's line of an `strace -c` table. */
export interface SyscallCount {
  /** The syscall's name, e.g. `writev`. */
  syscall: string;
  calls: number;
  /** Calls that returned an error (e.g. `EAGAIN` of a non-blocking `read`). */
  errors: number;
  /** Time strace measured in the calls, s (inflated by strace itself: not a cost of the target). */
  seconds: number;
}

/** The whole table: each syscall, most calls first (then by name), and the sums. */
export interface StraceSummary {
  syscalls: SyscallCount[];
  calls: number;
  errors: number;
}

const ROW = /^\s*(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(\d+)\s+(?:(\d+)\s+)?(\S+)\s*$/;

/**
 * Parses an `strace -c` table (`-o FILE`'s content; other lines such as `strace: Process N attached`
 * are skipped). The sums are of the syscall lines, so they hold without a `total` line too.
 * @throws Error when the text has no syscall line and no `total` line (not an `strace -c` table).
 */
export function parseStraceSummary(text: string): StraceSummary {
  const syscalls: SyscallCount[] = [];
  let sawTotal = false;
  for (const line of text.split('\n')) {
    const m = ROW.exec(line);
    if (!m) continue;
    if (m[6] === 'total') {
      sawTotal = true;
      continue;
    }
    syscalls.push({ syscall: m[6], calls: Number(m[4]), errors: Number(m[5] ?? 0), seconds: Number(m[2]) });
  }
  if (syscalls.length === 0 && !sawTotal) throw new Error('not an strace -c table');
  syscalls.sort((a, b) => b.calls - a.calls || a.syscall.localeCompare(b.syscall));
  return {
    syscalls,
    calls: syscalls.reduce((n, s) => n + s.calls, 0),
    errors: syscalls.reduce((n, s) => n + s.errors, 0),
  };
}
