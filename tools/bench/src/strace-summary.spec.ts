import { parseStraceSummary } from './strace-summary';

/** An `strace -f -c -p PID -o FILE` table as strace 6.1 writes it (errors blank when there were none). */
const TABLE = `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 41.10    0.061234          15      4002           writev
 30.05    0.044770          11      4010      2003 read
 12.00    0.017880          25       700           epoll_pwait
  9.85    0.014680          29       503        12 futex
  0.01    0.000020          20         1           madvise
  0.00    0.000000           0         3           mmap
------ ----------- ----------- --------- --------- ----------------
100.00    0.148998          16      9219      2015 total
`;

describe('strace -c table', () => {
  it('reads calls and errors of every syscall, most calls first', () => {
    const summary = parseStraceSummary(TABLE);
    expect(summary.syscalls.map((s) => [s.syscall, s.calls, s.errors])).toEqual([
      ['read', 4010, 2003],
      ['writev', 4002, 0],
      ['epoll_pwait', 700, 0],
      ['futex', 503, 12],
      ['mmap', 3, 0],
      ['madvise', 1, 0],
    ]);
    expect(summary.syscalls[0].seconds).toBeCloseTo(0.04477, 6);
  });

  it('sums the syscall lines (they agree with the total line)', () => {
    expect(parseStraceSummary(TABLE)).toMatchObject({ calls: 9219, errors: 2015 });
  });

  it('skips strace chatter such as the attach and detach lines', () => {
    const text = `strace: Process 4242 attached with 7 threads\n${TABLE}strace: Process 4242 detached\n`;
    expect(parseStraceSummary(text).calls).toBe(9219);
  });

  it('takes a window without any syscall (a total line alone) as zero calls', () => {
    const empty = TABLE.split('\n')
      .filter((l) => !/^\s+\d+\.\d+\s+\S+\s+\d+\s+\d+\s+(\d+\s+)?[a-z_]+$/.test(l) || /total$/.test(l))
      .join('\n');
    expect(parseStraceSummary(empty)).toEqual({ syscalls: [], calls: 0, errors: 0 });
  });

  it('refuses text that is not an strace -c table', () => {
    expect(() => parseStraceSummary('strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted\n')).toThrow(
      /not an strace -c table/,
    );
  });
});
