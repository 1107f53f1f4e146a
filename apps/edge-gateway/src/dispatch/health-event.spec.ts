import {
  clientClosed,
  internalError,
  invalidRequest,
  shuttingDown,
  UpstreamError,
  upstreamError,
  upstreamTimeout,
} from '../errors';
import { FirstByteTimeout } from '../errors';
import { healthEventOf, weighFirstByteTimeout, type AttemptOutcome } from './health-event';

const unreachable = upstreamError('The upstream could not be reached (ECONNREFUSED).', { detail: 'ECONNREFUSED' });
const reset = upstreamError('The upstream stream failed before it finished (ECONNRESET).', { detail: 'ECONNRESET' });
// As the OpenAI-compatible adapter words an upstream's status (`upstreamFailure`).
const answered503 = upstreamError('The upstream answered 503.', { detail: 'http://10.0.0.5:8000/v1 answered 503: {}' });
const refused401 = upstreamError(
  "The provider refused the gateway's credentials (upstream 401); an operator must fix its api_key.",
  { detail: 'http://10.0.0.5:8000/v1 answered 401' },
);
const rateLimited = new UpstreamError({ code: 'rate_limit_exceeded', fields: { retryAfterS: 7 }, retryAfterS: 7 });
const passedOn400 = new UpstreamError(
  { status: 400, code: 'invalid_request_error', type: 'invalid_request_error', message: 'Max context is 8 tokens.' },
  { detail: 'context' },
);
const notCounted5xx = new UpstreamError(
  { status: 503, code: 'upstream_error', type: 'server_error', message: 'Shown as is.' },
  { detail: 'x', counts: false },
);

const cases: Array<[string, AttemptOutcome, ReturnType<typeof healthEventOf>]> = [
  ['a trial at its first byte is a success', { at: 'first_byte', trial: true }, { kind: 'request', ok: true }],
  ['any other request books nothing at its first byte', { at: 'first_byte', trial: false }, undefined],
  [
    'an answer that ended is a success',
    { at: 'ended', trial: false, result: { outcome: 'done' } },
    { kind: 'request', ok: true },
  ],
  [
    'a trial that ended was booked at its first byte',
    { at: 'ended', trial: true, result: { outcome: 'done' } },
    undefined,
  ],
  [
    'a client that stalled or left leaves the upstream a success',
    { at: 'ended', trial: false, result: { outcome: 'client_stalled' } },
    { kind: 'request', ok: true },
  ],
  [
    'a stream gone silent mid-stream is a failure, trial or not',
    {
      at: 'ended',
      trial: true,
      result: { outcome: 'upstream_failed', error: upstreamTimeout({ wait: 'stream_idle', ms: 100 }) },
    },
    {
      kind: 'request',
      ok: false,
      reason: 'upstream sent nothing for 100 ms mid-stream (gateway.stream_idle_timeout_ms)',
    },
  ],
  [
    'a stream cut mid-stream is a failure',
    { at: 'ended', trial: false, result: { outcome: 'upstream_failed', error: reset } },
    { kind: 'request', ok: false, reason: 'upstream stream failed before it finished (ECONNRESET)' },
  ],
  [
    "an upstream's 4xx in-band mid-stream books nothing",
    { at: 'ended', trial: false, result: { outcome: 'upstream_failed', error: passedOn400 } },
    undefined,
  ],
  [
    'the drain running out mid-stream books nothing',
    { at: 'ended', trial: false, result: { outcome: 'upstream_failed', error: shuttingDown() } },
    undefined,
  ],
  [
    'an unreachable upstream before the first byte is a failure',
    { at: 'failed', error: unreachable },
    { kind: 'request', ok: false, reason: 'upstream could not be reached (ECONNREFUSED)' },
  ],
  [
    "an upstream's 5xx is a failure named by the upstream's status, never the gateway's 502",
    { at: 'failed', error: answered503 },
    { kind: 'request', ok: false, reason: 'upstream answered 503' },
  ],
  [
    'refused credentials name the upstream status, without the advice to the operator',
    { at: 'failed', error: refused401 },
    { kind: 'request', ok: false, reason: "provider refused the gateway's credentials (upstream 401)" },
  ],
  [
    'no first byte in time is a failure',
    { at: 'failed', error: upstreamTimeout({ wait: 'first_byte', ms: 100 }) },
    { kind: 'request', ok: false, reason: 'upstream sent no byte within 100 ms (gateway.request_timeout_ms)' },
  ],
  [
    'an upstream failure whose message is log-only gives its code, never what the log sees',
    { at: 'failed', error: upstreamError('http://10.0.0.5:8000/v1 answered 503') },
    { kind: 'request', ok: false, reason: 'upstream_error' },
  ],
  [
    'a 429 backs the provider off for its Retry-After',
    { at: 'failed', error: rateLimited },
    { kind: 'backoff', seconds: 7, reason: 'upstream 429 rate_limit_exceeded' },
  ],
  [
    "an upstream's 4xx about the request is the client's answer: a success",
    { at: 'failed', error: passedOn400 },
    { kind: 'request', ok: true },
  ],
  ['a 5xx that says it does not count books nothing', { at: 'failed', error: notCounted5xx }, undefined],
  ["the gateway's own fault books nothing", { at: 'failed', error: internalError() }, undefined],
  [
    'a bug thrown on the way to the upstream books nothing',
    { at: 'failed', error: new RangeError('stack') },
    undefined,
  ],
  ["the client's own 4xx books nothing", { at: 'failed', error: invalidRequest('bad', 'n') }, undefined],
  ['the client leaving books nothing', { at: 'failed', error: clientClosed() }, undefined],
  ['the drain running out books nothing', { at: 'failed', error: shuttingDown() }, undefined],
];

describe('healthEventOf: only what an upstream did counts against its provider', () => {
  it.each(cases)('%s', (_rule, attempt, event) => {
    expect(healthEventOf(attempt)).toEqual(event);
  });
});

describe("weighFirstByteTimeout: a non-streamed request's size explains a wait only as long as a fast engine needs for it", () => {
  // [what, timeout ms, prompt, completion allowance, counts]; the probe passes, nobody else answered.
  it.each([
    ['20,000 tokens asked, a 10 s timeout', 10_000, 10, 20_000, false],
    ['16 tokens asked, a 10 s timeout', 10_000, 10, 16, true],
    ['16 tokens asked, a 60 ms timeout (80 ms explained)', 60, 10, 16, false],
    ['none named (1,024 assumed: 5.1 s), a 120 s timeout', 120_000, 10, undefined, true],
    ['none named, a 1 s timeout', 1000, 10, undefined, false],
    ['embeddings (0 completion) of 100,000 prompt tokens (25 s), a 10 s timeout', 10_000, 100_000, 0, false],
    ['embeddings of 10 prompt tokens, a 10 s timeout', 10_000, 10, 0, true],
  ] as const)('%s: counts %s', (_what, ms, prompt, completion, counts) => {
    const weighed = weighFirstByteTimeout(new FirstByteTimeout(ms), {
      attemptStartedAt: 1000,
      streamed: false,
      lastFirstByteAt: undefined,
      probePasses: true,
      size: { prompt, completion },
    });
    expect(weighed.countsAgainstProvider).toBe(counts);
  });
});

describe('weighFirstByteTimeout: a first-byte timeout counts only when the request cannot explain it', () => {
  const timeout = new FirstByteTimeout(100);
  // [what, counts, streamed, the provider's latest first byte to anyone, its probe passes]; the attempt started at 1000.
  it.each([
    ['streamed, a provider that never answered anyone, its probe passing', true, true, undefined, true],
    ['streamed, a provider that last answered before this attempt started', true, true, 999, true],
    ['streamed, a provider that answered another request as it started', false, true, 1000, true],
    ['streamed, a provider that answered another request meanwhile', false, true, 1050, false],
    ['not streamed, a provider whose probe passes', false, false, undefined, true],
    ['not streamed, a provider whose probe does not pass (or was not probed lately)', true, false, undefined, false],
    ['not streamed, probe not passing, last answered before it started', true, false, 999, false],
    ['not streamed, probe not passing, answered another request meanwhile', false, false, 1050, false],
  ] as const)('%s: counts %s', (_what, counts, streamed, lastFirstByteAt, probePasses) => {
    const weighed = weighFirstByteTimeout(timeout, {
      attemptStartedAt: 1000,
      streamed,
      lastFirstByteAt,
      probePasses,
      size: { prompt: 10, completion: undefined },
    });
    expect(weighed.countsAgainstProvider).toBe(counts);
    expect(weighed.failsOver).toBe(counts);
    expect(healthEventOf({ at: 'failed', error: weighed })).toEqual(
      counts
        ? { kind: 'request', ok: false, reason: 'upstream sent no byte within 100 ms (gateway.request_timeout_ms)' }
        : undefined,
    );
    expect([weighed.status, weighed.code]).toEqual([504, 'upstream_timeout']);
  });
});
