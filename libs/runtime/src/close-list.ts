/**
 * What a process holds open (Redis connections, queues, child processes, timers, watchers, its
 * server), closed in the reverse order of opening, like fastify's `onClose` hooks: each component
 * registers its own close hook as soon as it is open, and every way out of the process (SIGTERM or
 * SIGINT after the drain, a listen failure, a fatal error) runs the one list.
 */
export class CloseList {
  private readonly steps: Array<{ name: string; close: () => unknown }> = [];

  /** Registers `close` (sync or async; its errors are ignored) to run at the way out, before what was registered earlier. */
  add(name: string, close: () => unknown): void {
    this.steps.push({ name, close });
  }

  /** Runs every registered step once, newest first, each awaited; @returns the names closed, in order. */
  async closeAll(): Promise<string[]> {
    const closed: string[] = [];
    for (let step = this.steps.pop(); step; step = this.steps.pop()) {
      await Promise.resolve()
        .then(step.close)
        .catch(() => undefined);
      closed.push(step.name);
    }
    return closed;
  }
}
