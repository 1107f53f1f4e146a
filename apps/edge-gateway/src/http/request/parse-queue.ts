/**
 * Costly request bodies are parsed and checked one per turn of the event loop (README "Security",
 * docs/architecture.md "Costly bodies"): a burst of bodies that each cost tens of ms would, parsed
 * as they finish arriving, run back to back in one poll phase and hold the loop for their sum, long
 * enough to miss a lease renewal and fence other users' streams (docs/architecture.md "Fencing").
 * Queued, one body runs per `setImmediate` callback and the next is scheduled from inside it: a
 * callback queued during the check phase runs in the next loop iteration, so timers (lease renewal,
 * fencing) and I/O (Redis replies, other clients) run between any two bodies. (One `setImmediate`
 * per body would not do: every callback queued during one poll phase runs in the same check phase.)
 */

/** Bodies waiting for their turn, oldest first; `head` is the next to run. */
const waiting: Array<() => void> = [];
let head = 0;
let scheduled = false;

/**
 * Runs `task` on a later turn of the event loop, after every task queued before it, at most one
 * task per loop iteration in the whole process. A task that throws does not stop the queue (the
 * error is re-thrown on its own turn, as an uncaught exception would be: tasks catch their own).
 */
export function onePerTurn(task: () => void): void {
  waiting.push(task);
  if (!scheduled) {
    scheduled = true;
    setImmediate(runOne);
  }
}

/** Tasks waiting, for tests and metrics. */
export const waitingTasks = (): number => waiting.length - head;

function runOne(): void {
  const task = waiting[head];
  waiting[head++] = noop;
  if (head === waiting.length) {
    waiting.length = 0;
    head = 0;
    scheduled = false;
  } else {
    // Under steady load the queue may never empty: drop the run part now and then.
    if (head >= 1024 && head * 2 >= waiting.length) {
      waiting.splice(0, head);
      head = 0;
    }
    setImmediate(runOne);
  }
  task();
}

const noop = (): void => undefined;
