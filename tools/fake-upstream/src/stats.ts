import type { IncomingHttpHeaders } from 'node:http';
import type { EngineStats } from './engine';

/** Request counts of the fake upstream (all, or one model). */
export interface RequestCounts {
  /** Inference requests received since start or the last reset. */
  total: number;
  /** Requests whose response has not finished yet (counted from arrival, before any delay). */
  current: number;
  /** Highest `current` seen since start or the last reset. */
  max: number;
  /** Requests whose client closed the connection before the response finished. */
  aborted: number;
}

/** The last request seen for a model, exactly as received. */
export interface RecordedRequest {
  method: string;
  /** Path with query, e.g. `/v1/chat/completions`. */
  path: string;
  /** Request headers, names lowercase, nothing redacted. */
  headers: IncomingHttpHeaders;
  /** Parsed JSON body, including any `fake` knobs. */
  body: unknown;
}

/**
 * Counters served by `GET /__stats` and `FakeUpstream.stats()`. Only inference requests
 * (`POST /v1/chat/completions`, `POST /v1/responses`) are counted; probes, `/v1/models` and the
 * `/__*` routes are not. The totals count a request on arrival; `byModel` counts it once its body
 * names the model, keyed by that name as the client sent it.
 */
export interface FakeStats extends RequestCounts {
  byModel: Record<string, RequestCounts>;
  lastRequest: Record<string, RecordedRequest>;
  /** The engine model's counters, only when it is on (`startFakeUpstream({ engine })`; tools/fake-upstream/README, "Engine model"). */
  engine?: EngineStats;
}

/** One counted request: `finish` must be called exactly once when its response finishes or closes. */
export interface RequestTicket {
  /** Attributes the request to a model (once); records it as that model's last request. */
  setModel(model: string, request: RecordedRequest): void;
  /** Ends the request; idempotent. `aborted` = the client went away first. */
  finish(aborted: boolean): void;
}

/** Concurrency and request recorder; cheap enough to sit on the benchmark's hot path. */
export class StatsRecorder {
  private all = emptyCounts();
  private byModel = new Map<string, RequestCounts>();
  private lastRequest = new Map<string, RecordedRequest>();

  /** Counts a request on arrival and returns its ticket. */
  begin(): RequestTicket {
    const counts: RequestCounts[] = [this.all];
    enter(this.all);
    let done = false;
    return {
      setModel: (model, request) => {
        if (done || counts.length > 1) return;
        let m = this.byModel.get(model);
        if (!m) this.byModel.set(model, (m = emptyCounts()));
        enter(m);
        counts.push(m);
        this.lastRequest.set(model, request);
      },
      finish: (aborted) => {
        if (done) return;
        done = true;
        for (const c of counts) {
          c.current--;
          if (aborted) c.aborted++;
        }
      },
    };
  }

  /** Counts are copies, safe to keep and compare; recorded requests are shared and never mutated. */
  snapshot(): FakeStats {
    const byModel: Record<string, RequestCounts> = {};
    for (const [model, c] of this.byModel) byModel[model] = { ...c };
    return { ...this.all, byModel, lastRequest: Object.fromEntries(this.lastRequest) };
  }

  /**
   * Zeroes `total` and `aborted` and forgets the recorded requests. Requests still in flight stay
   * in `current` (so it never goes negative) and `max` restarts from `current`.
   */
  reset(): void {
    restart(this.all);
    for (const [model, c] of this.byModel) {
      if (c.current === 0) this.byModel.delete(model);
      else restart(c);
    }
    this.lastRequest.clear();
  }
}

function emptyCounts(): RequestCounts {
  return { total: 0, current: 0, max: 0, aborted: 0 };
}

function enter(c: RequestCounts): void {
  c.total++;
  if (++c.current > c.max) c.max = c.current;
}

function restart(c: RequestCounts): void {
  c.total = 0;
  c.aborted = 0;
  c.max = c.current;
}
