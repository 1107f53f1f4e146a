/**
 * Reading the cost totals of a callgrind dump file (the "Callgrind Format Specification" of the
 * Valgrind manual: header lines `events: Ir …`, `summary: N …` in the header and `totals: N …` at the
 * end, one number per event in the order of `events:`).
 */

/**
 * Instructions executed (event `Ir`) in one callgrind dump: its `summary:` line, else its `totals:`
 * line, at the position of `Ir` in `events:` (the first event when the file names none).
 * @returns undefined when the file has neither line yet (a dump still being written).
 * @throws Error when `events:` does not list `Ir` (the tool ran without instruction counting).
 */
export function callgrindInstructions(text: string): number | undefined {
  const events = /^events:\s*(.+)$/m.exec(text)?.[1].trim().split(/\s+/) ?? ['Ir'];
  const index = events.indexOf('Ir');
  if (index < 0) throw new Error(`callgrind dump counts ${events.join(' ')}, not Ir`);
  const line = /^summary:\s*(.+)$/m.exec(text) ?? /^totals:\s*(.+)$/m.exec(text);
  if (!line) return undefined;
  // A trailing event with no cost may be left out of the line: it counts 0.
  const value = line[1].trim().split(/\s+/)[index] ?? '0';
  if (!/^\d+$/.test(value)) throw new Error(`callgrind dump: not a count: ${line[0]}`);
  return Number(value);
}

/**
 * Instructions of one callgrind window: the sum over the dump files it wrote (one per dump, or one
 * per thread with `--separate-threads=yes`).
 * @throws Error naming the file when one of them has no total (see {@link callgrindInstructions}).
 */
export function sumCallgrindDumps(files: ReadonlyArray<{ name: string; text: string }>): number {
  let sum = 0;
  for (const file of files) {
    const n = callgrindInstructions(file.text);
    if (n === undefined) throw new Error(`callgrind dump ${file.name} has no summary or totals line`);
    sum += n;
  }
  return sum;
}
