import { BudgetLedger } from './budget-ledger';
import { MemoryProviderQueue } from './memory-queue';
import type { QueueClient } from './provider-queue';

// docs/architecture.md, "Token budgets": the windows slide on the clock the ledger is given.
describe('BudgetLedger windows', () => {
  let now = 1_700_000_000_000;
  const clock = () => now;
  const c: QueueClient = { id: 'c', band: 0, weight: 1, tokenBudgets: { perMinute: 1000, perDay: 5000 } };
  const reserved = (ledger: BudgetLedger, weight: number) => {
    const d = ledger.admit(c, weight);
    if (d.kind !== 'reserved') throw new Error(`expected a reservation, got ${d.kind}`);
    return d;
  };

  it('counts a charge until its bucket lies wholly outside the window (60 to 61 s for the minute)', () => {
    now = 1_700_000_000_250;
    const ledger = new BudgetLedger(clock);
    ledger.settle(reserved(ledger, 600).reservation, 600);
    now += 60_000;
    expect(ledger.admit(c, 500)).toMatchObject({ kind: 'exceeded', window: 'minute', used: 600, retryMs: 750 });
    now += 749;
    expect(ledger.admit(c, 500).kind).toBe('exceeded');
    now += 1;
    const d = reserved(ledger, 500);
    // The day still holds both.
    expect(ledger.windows([c]).map((w) => [w.window, w.reservedTokens, w.usedTokens])).toEqual([
      ['minute', 500, 0],
      ['day', 500, 600],
    ]);
    expect(d.standing).toMatchObject({ window: 'minute', remainingTokens: 500 });
  });

  it('hints the time until enough of the oldest charges leave, not all of them', () => {
    now = 1_700_000_100_000;
    const ledger = new BudgetLedger(clock);
    ledger.settle(reserved(ledger, 300).reservation);
    now += 10_000;
    ledger.settle(reserved(ledger, 300).reservation);
    now += 10_000;
    ledger.settle(reserved(ledger, 300).reservation);
    // 900 of 1000 held: 250 more needs the first 300 gone, at 61 s after it was made.
    expect(ledger.admit(c, 250)).toMatchObject({ kind: 'exceeded', retryMs: 41_000 });
    // 700 more needs the first two gone.
    expect(ledger.admit(c, 700)).toMatchObject({ kind: 'exceeded', retryMs: 51_000 });
  });

  // README "Token budgets": a budget bounds what the requests in any minute used, requests longer
  // than the window included: a reservation is held while its request runs, however long, and the
  // tokens it used are charged when it ends, in the windows that contain its release.
  it('holds a reservation in every window while its request runs longer than the window, and charges its usage at release', () => {
    now = 1_700_000_200_000;
    const ledger = new BudgetLedger(clock);
    const d = reserved(ledger, 400);
    now += 120_000;
    // Two minutes on, the running request still counts: the minute cannot hold 700 more.
    expect(ledger.windows([c]).map((w) => [w.window, w.reservedTokens, w.usedTokens, w.remainingTokens])).toEqual([
      ['minute', 400, 0, 600],
      ['day', 400, 0, 4600],
    ]);
    expect(ledger.admit(c, 700)).toMatchObject({ kind: 'exceeded', window: 'minute', used: 400 });
    // It used 900 (more than reserved): charged now, in the minute of the release.
    ledger.settle(d.reservation, 900);
    expect(ledger.windows([c]).map((w) => [w.window, w.reservedTokens, w.usedTokens, w.remainingTokens])).toEqual([
      ['minute', 0, 900, 100],
      ['day', 0, 900, 4100],
    ]);
    expect(ledger.admit(c, 200)).toMatchObject({ kind: 'exceeded', window: 'minute', used: 900 });
    now += 61_000;
    expect(ledger.windows([c]).map((w) => [w.window, w.usedTokens])).toEqual([
      ['minute', 0],
      ['day', 900],
    ]);
    // A reservation given back (a lease nobody released: a dead replica's) leaves nothing, however old.
    const lost = reserved(ledger, 300);
    now += 90_000;
    expect(ledger.windows([c])[0]).toMatchObject({ reservedTokens: 300, usedTokens: 0 });
    ledger.giveBack(lost.reservation);
    expect(ledger.windows([c]).map((w) => [w.window, w.reservedTokens, w.usedTokens])).toEqual([
      ['minute', 0, 0],
      ['day', 0, 900],
    ]);
    now += 86_400_000;
    expect(ledger.windows([c]).map((w) => [w.window, w.usedTokens, w.resetMs])).toEqual([
      ['minute', 0, 0],
      ['day', 0, 0],
    ]);
  });

  it('drives the memory backend on the injected clock', async () => {
    now = 1_700_000_300_000;
    const queue = new MemoryProviderQueue({ now: clock });
    const p = { providerId: 'p', maxConcurrency: 4, maxQueued: 4 };
    await queue.configure([p]);
    const ask = () =>
      queue.acquireLease({
        modelGroupKey: 'm',
        candidates: [p],
        maxWaitMs: 1000,
        client: c,
        tokens: { prompt: 900, completion: 0 },
      });
    const lease = await ask();
    await lease.release({ tokens: 990, reported: true });
    await expect(ask()).rejects.toMatchObject({ code: 'rate_limit_exceeded', retryAfterS: 61 });
    now += 61_000;
    await (await ask()).release();
    await queue.close();
  });
});
