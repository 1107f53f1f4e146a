import { catalogAnswer, echoed, MAX_ECHOED_CHARS, MAX_MESSAGE_CHARS, resolveError } from './index';

describe('echoed: the one bound on client strings in errors (README "Errors")', () => {
  it('keeps a short string, cuts a long one to MAX_ECHOED_CHARS and counts the rest', () => {
    expect(echoed('gpt-4o')).toBe('gpt-4o');
    expect(echoed('m'.repeat(1500))).toBe(`${'m'.repeat(MAX_ECHOED_CHARS)}…(1300 more characters)`);
  });

  it('never cuts a string twice: bounding again changes nothing', () => {
    const once = echoed('x'.repeat(100_000));
    expect(echoed(once)).toBe(once);
    expect(echoed(`${'x'.repeat(5000)}…(12 more characters)`)).toBe(`${'x'.repeat(200)}…(4821 more characters)`);
  });

  it("bounds a catalog error's string fields, `param` and message, whatever the caller passed", () => {
    const notFound = resolveError({
      code: 'model_not_found',
      fields: { model: 'm'.repeat(100_000) },
      param: 'p'.repeat(100_000),
    });
    expect(notFound.message.length).toBeLessThan(400);
    expect(notFound.param).toBe(echoed('p'.repeat(100_000)));
    const problem = resolveError({ code: 'invalid_request_error', fields: { problem: 'q'.repeat(100_000) } });
    expect(problem.message).toBe(echoed('q'.repeat(100_000), MAX_MESSAGE_CHARS));
    const answer = catalogAnswer('invalid_request_error', 'r'.repeat(100_000), { param: 's'.repeat(100_000) });
    expect(JSON.stringify(answer.body).length).toBeLessThan(MAX_MESSAGE_CHARS + 400);
  });
});
