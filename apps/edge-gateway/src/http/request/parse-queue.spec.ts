import { readFile } from 'node:fs';
import { onePerTurn, waitingTasks } from './parse-queue';

/** Spins the CPU for `ms`, as a costly JSON.parse would. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/**
 * Six 30 ms tasks handed to `schedule` from one callback of `phase` (the I/O callback in which
 * several bodies finish arriving, or a timer), while a 1 ms interval stands for the lease renewal
 * and fencing timers. @returns what ran, in order: `body` for a task, `tick` for the timer.
 */
async function burst(schedule: (task: () => void) => void, phase: 'poll' | 'timers'): Promise<string[]> {
  const order: string[] = [];
  const timer = setInterval(() => order.push('tick'), 1);
  await new Promise<void>((resolve) => {
    let left = 6;
    const queueAll = () => {
      for (let i = 0; i < 6; i++)
        schedule(() => {
          busy(30);
          order.push('body');
          if (--left === 0) resolve();
        });
    };
    if (phase === 'poll') readFile(__filename, queueAll);
    else setTimeout(queueAll, 1);
  });
  clearInterval(timer);
  return order;
}

/** How many bodies ran right after another, with no timer between them. */
const backToBack = (order: string[]) => order.filter((what, i) => what === 'body' && order[i - 1] === 'body').length;

describe('onePerTurn: at most one costly body per turn of the event loop, timers and I/O between', () => {
  it.each(['poll', 'timers'] as const)(
    'a timer fires between any two of six bodies queued in one %s callback',
    async (phase) => {
      const order = await burst(onePerTurn, phase);
      expect(order.filter((w) => w === 'body')).toHaveLength(6);
      expect(backToBack(order)).toBe(0);
      expect(waitingTasks()).toBe(0);
    },
  );

  it('(the control: one setImmediate per body runs all six back to back, in one check phase)', async () => {
    expect(backToBack(await burst((task) => setImmediate(task), 'poll'))).toBe(5);
  });

  it('runs tasks in the order queued, also those queued by a running task', async () => {
    const ran: number[] = [];
    await new Promise<void>((resolve) => {
      onePerTurn(() => {
        ran.push(1);
        onePerTurn(() => {
          ran.push(4);
          resolve();
        });
      });
      onePerTurn(() => ran.push(2));
      onePerTurn(() => ran.push(3));
    });
    expect(ran).toEqual([1, 2, 3, 4]);
  });
});
