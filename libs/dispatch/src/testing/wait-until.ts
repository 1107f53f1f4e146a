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
