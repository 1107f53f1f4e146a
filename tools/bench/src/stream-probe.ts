import { performance } from 'node:perf_hooks';
import { request, type Dispatcher } from 'undici';

/** One streamed Chat Completion to time. */
export interface StreamSpec {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** An undici pool or agent with keep-alive, shared by the streams of one target. */
  dispatcher: Dispatcher;
  signal?: AbortSignal;
  /** Called once, when the first content event arrives (the stream is open end to end). */
  onFirstContent?: () => void;
}

/** What the client saw of one stream. Times are ms from the moment the request was sent. */
export interface StreamSample {
  status: number;
  /** Until the status line and headers. */
  headersMs: number;
  /** Until the first event that carries content (`choices[0].delta.content`): time to first byte as a user sees it. */
  ttfbMs: number;
  /** Until the body ended. */
  totalMs: number;
  /** SSE events received, `[DONE]` included. */
  events: number;
  /** Events that carried content; the upstream sends exactly `chunks` of them. */
  contentEvents: number;
  /** Body reads (`data` callbacks); fewer reads than content events means the path coalesced chunks. */
  reads: number;
  /** Arrival gaps between consecutive content events. */
  gapsMs: number[];
}

/**
 * Sends one streaming request and timestamps each SSE event when the read that completed it
 * arrives. Reads are consumed in flowing mode (`data` events), never through `read()`, which
 * would join buffered chunks and hide how the server wrote them.
 * @throws Error for a non-2xx answer (with the start of its body) or a broken stream.
 */
export async function probeStream(spec: StreamSpec): Promise<StreamSample> {
  const start = performance.now();
  const res = await request(spec.url, {
    method: 'POST',
    dispatcher: spec.dispatcher,
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      authorization: 'Bearer bench',
      ...spec.headers,
    },
    body: spec.body,
    signal: spec.signal,
  });
  const headersMs = performance.now() - start;
  if (res.statusCode < 200 || res.statusCode >= 300) {
    const text = await res.body.text();
    throw new Error(`stream answered ${res.statusCode}: ${text.slice(0, 300)}`);
  }
  const sample: StreamSample = {
    status: res.statusCode,
    headersMs,
    ttfbMs: NaN,
    totalMs: NaN,
    events: 0,
    contentEvents: 0,
    reads: 0,
    gapsMs: [],
  };
  let pending = '';
  let lastContentAt = NaN;
  await new Promise<void>((resolve, reject) => {
    res.body.setEncoding('utf8');
    res.body.on('data', (chunk: string) => {
      const now = performance.now();
      sample.reads++;
      pending += chunk;
      let end: number;
      while ((end = pending.search(/\r?\n\r?\n/)) >= 0) {
        const event = pending.slice(0, end);
        pending = pending.slice(end).replace(/^\r?\n\r?\n/, '');
        sample.events++;
        if (!carriesContent(event)) continue;
        sample.contentEvents++;
        if (Number.isNaN(lastContentAt)) {
          sample.ttfbMs = now - start;
          spec.onFirstContent?.();
        } else sample.gapsMs.push(now - lastContentAt);
        lastContentAt = now;
      }
    });
    res.body.once('end', () => resolve());
    res.body.once('error', reject);
  });
  sample.totalMs = performance.now() - start;
  return sample;
}

/** True for a `data:` event whose JSON has a string `choices[0].delta.content`. */
export function carriesContent(event: string): boolean {
  const data = event
    .split(/\r?\n/)
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trimStart())
    .join('\n');
  if (!data || data === '[DONE]') return false;
  try {
    const parsed = JSON.parse(data) as { choices?: Array<{ delta?: { content?: unknown } }> };
    return typeof parsed.choices?.[0]?.delta?.content === 'string';
  } catch {
    return false;
  }
}
