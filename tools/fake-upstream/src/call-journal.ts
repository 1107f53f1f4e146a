/** The tokens an answer reported: chat `usage.prompt_tokens` / `completion_tokens`, Responses `input_tokens` / `output_tokens`. */
export interface JournalUsage {
  prompt: number;
  completion: number;
}

/** One inference call as the fake upstream saw it. */
export interface JournalCall {
  /** The model the call named. */
  model: string;
  /** Its `tag` knob, when it sent one (the tests' marker of who sent it). */
  tag?: number;
  /** Arrival of the request, and the end of its response or connection (`Date.now()`, ms); `endedAt` null while running. */
  startedAt: number;
  endedAt: number | null;
  /**
   * The usage its answer reported, once the part that carries it was written (a whole JSON answer; a stream's
   * closing events: a chat stream only when the request asked for `stream_options.include_usage`). Absent for an
   * answer without usage: an error, a stream cut or stalled before its end, a chat stream that did not ask.
   */
  usage?: JournalUsage;
}

/** The handle of one call in the journal: `end` marks its end (once), `reported` records the usage its answer sent. */
export interface JournalEntry {
  end(): void;
  reported(usage: JournalUsage): void;
}

/**
 * The journal of every inference call, when `FakeUpstreamOptions.journal` is on: who called (the
 * `tag` knob), when it started and when it ended, and the usage its answer reported, so a test can
 * compute the concurrency of any group of calls at any moment, or the tokens charged for them. Kept
 * in memory until `reset`.
 */
export class CallJournal {
  private calls: JournalCall[] = [];

  /** Records a call that arrived at `startedAt`. */
  begin(model: string, tag: number | undefined, startedAt: number): JournalEntry {
    const call: JournalCall = { model, ...(tag !== undefined ? { tag } : {}), startedAt, endedAt: null };
    this.calls.push(call);
    return {
      end: () => {
        call.endedAt ??= Date.now();
      },
      reported: (usage) => {
        call.usage = { prompt: usage.prompt, completion: usage.completion };
      },
    };
  }

  /** Copies of the calls, in arrival order. */
  snapshot(): JournalCall[] {
    return this.calls.map((c) => ({ ...c, ...(c.usage ? { usage: { ...c.usage } } : {}) }));
  }

  reset(): void {
    this.calls = [];
  }
}
