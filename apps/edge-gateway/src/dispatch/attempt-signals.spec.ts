import type { Response } from 'express';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { ApiError } from '../errors';
import { AttemptSignals } from './attempt-signals';

/** A real, unsent node:http response (no server needed: AttemptSignals only listens to its `close`). */
const response = () => new ServerResponse(new IncomingMessage(new Socket())) as unknown as Response;

const codeOf = (signal: AbortSignal) => (signal.reason instanceof ApiError ? signal.reason.code : signal.reason);

describe('AttemptSignals and the drain (README "Production layout": running requests see the drain end)', () => {
  it('the end of the drain aborts the running attempt of every open request with shutting_down', () => {
    const drain = new AbortController();
    const first = new AttemptSignals(response(), drain.signal);
    const second = new AttemptSignals(response(), drain.signal);
    const secondFirstAttempt = second.current;
    const retried = second.next();
    drain.abort();
    expect(codeOf(first.current.signal)).toBe('shutting_down');
    expect(codeOf(retried.signal)).toBe('shutting_down');
    // Only the attempt running at the time: an earlier one is over.
    expect(secondFirstAttempt.signal.aborted).toBe(false);
  });

  it('a request over before the drain ends is not aborted, and neither is one that started after it', () => {
    const drain = new AbortController();
    const done = new AttemptSignals(response(), drain.signal);
    done.close();
    drain.abort();
    expect(done.current.signal.aborted).toBe(false);
    const late = new AttemptSignals(response(), drain.signal);
    expect(late.current.signal.aborted).toBe(false);
    late.close();
  });

  it('each drain signal aborts only its own requests', () => {
    const a = new AbortController();
    const b = new AbortController();
    const underA = new AttemptSignals(response(), a.signal);
    const underB = new AttemptSignals(response(), b.signal);
    a.abort();
    expect(codeOf(underA.current.signal)).toBe('shutting_down');
    expect(underB.current.signal.aborted).toBe(false);
    b.abort();
    expect(codeOf(underB.current.signal)).toBe('shutting_down');
  });

  it('the client leaving before the answer finished aborts the attempt with client_closed and marks it gone', () => {
    const res = response();
    const signals = new AttemptSignals(res, undefined);
    res.emit('close');
    expect(signals.clientGone).toBe(true);
    expect(codeOf(signals.current.signal)).toBe('client_closed');
    signals.close();
  });
});
