/**
 * Polls `check` every 10 ms until it returns true (poll with a deadline, no fixed sleeps).
 * @throws Error naming `what` when `timeoutMs` passes first.
 */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Waits until `output()` (a spawned process's stdout and stderr so far) matches `expected`: a log
 * line reaches stdout up to `LOG_FLUSH_MS` after it is logged (README "Production layout").
 * @returns the output then
 * @throws Error with the output when it does not within `timeoutMs`
 */
export async function waitForOutput(
  output: () => string,
  expected: RegExp | string,
  timeoutMs = 5000,
): Promise<string> {
  const matches = () => (typeof expected === 'string' ? output().includes(expected) : expected.test(output()));
  await waitUntil(matches, timeoutMs, `${String(expected)} in the output`).catch((err: Error) => {
    throw new Error(`${err.message}; output:\n${output()}`);
  });
  return output();
}
