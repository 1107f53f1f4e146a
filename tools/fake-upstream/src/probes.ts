import type { ServerResponse } from 'node:http';

/**
 * The inference requests a fake upstream is working on, for `probesWaitForWork`: a server whose
 * one worker is busy with long completions answers its health probe only when the work is done
 * (the probe waits behind it), as a loaded single-worker server does.
 */
export class WorkGate {
  private working = 0;
  private waiters: Array<() => void> = [];

  /** Counts `res`'s request as work until its response finishes or its connection closes. */
  enter(res: ServerResponse): void {
    this.working++;
    res.once('close', () => {
      if (--this.working > 0) return;
      const waiters = this.waiters;
      this.waiters = [];
      for (const wake of waiters) wake();
    });
  }

  /** Resolves at once when no request is being worked on, else when the last one ends. */
  idle(): Promise<void> {
    return this.working === 0 ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve));
  }
}

/** The fixed answers of the probe routes (and the empty body). */
export interface ProbeAnswers {
  models: Buffer;
  tags: Buffer;
  version: Buffer;
  empty: Buffer;
}

/** The probe routes and which fixed answer each gets: vLLM `/health`, Ollama `/api/version` and `/api/tags`, `/v1/models`. */
export const PROBES: Readonly<Record<string, keyof ProbeAnswers>> = {
  '/v1/models': 'models',
  '/health': 'empty',
  '/api/version': 'version',
  '/api/tags': 'tags',
};

/** The probe answers of a fake upstream `name` listing `models` (OpenAI `/v1/models`, Ollama `/api/tags`). */
export function probeAnswers(name: string, models: readonly string[]): ProbeAnswers {
  return {
    models: Buffer.from(
      JSON.stringify({
        object: 'list',
        data: models.map((id) => ({ id, object: 'model', created: 0, owned_by: name })),
      }),
    ),
    tags: Buffer.from(
      JSON.stringify({ models: models.map((m) => ({ name: m, model: m, size: 0, digest: '', details: {} })) }),
    ),
    version: Buffer.from(JSON.stringify({ version: '0.0.0-fake' })),
    empty: Buffer.alloc(0),
  };
}
