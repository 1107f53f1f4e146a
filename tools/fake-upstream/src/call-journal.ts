/** One inference call as the fake upstream saw it. */
export interface JournalCall {
  /** The model the call named. */
  model: string;
  /** Its `tag` knob, when it sent one (the tests' marker of who sent it). */
  tag?: number;
  /** Arrival of the request, and the end of its response or connection (`Date.now()`, ms); `endedAt` null while running. */
  startedAt: number;
  endedAt: number | null;
}

/**
 * The journal of every inference call, when `FakeUpstreamOptions.journal` is on: who called (the
 * `tag` knob), when it started and when it ended, so a test can compute the concurrency of any
 * group of calls at any moment. Kept in memory until `reset`.
 */
export class CallJournal {
  private calls: JournalCall[] = [];

  /** Records a call that arrived at `startedAt`; the returned function marks its end. */
  begin(model: string, tag: number | undefined, startedAt: number): () => void {
    const call: JournalCall = { model, ...(tag !== undefined ? { tag } : {}), startedAt, endedAt: null };
    this.calls.push(call);
    return () => {
      call.endedAt ??= Date.now();
    };
  }

  /** Copies of the calls, in arrival order. */
  snapshot(): JournalCall[] {
    return this.calls.map((c) => ({ ...c }));
  }

  reset(): void {
    this.calls = [];
  }
}
