import { budgetArg, tokenArgs, tokenText } from './job-client';
import { wholeTokens } from './token-limit';

// docs/architecture.md, "Token budgets" and "Token limits": every token count the scripts read is plain
// digits, and an allowance past every number weighs the most a window or limit can hold, not nothing.
describe('token counts as the scripts read them', () => {
  it('rounds up, reads NaN and negatives as 0, and caps at 2^53 − 1 (Infinity included)', () => {
    expect([0.2, 7, -3, Number.NaN, 1e21, Number.POSITIVE_INFINITY].map(wholeTokens)).toEqual([
      1,
      7,
      0,
      0,
      Number.MAX_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER,
    ]);
  });

  it('writes every count in plain digits: budget weight, prompt and completion, usage', () => {
    expect(tokenText(1e21)).toBe('9007199254740991');
    expect(tokenText(Number.POSITIVE_INFINITY)).toBe('9007199254740991');
    const metered = { id: 'metered', band: 0, weight: 1, tokenBudgets: { perMinute: 1000 } };
    expect(budgetArg(metered, 1e21)).toBe('9007199254740991|1000|');
    expect(tokenArgs({ prompt: 1e300, completion: Number.POSITIVE_INFINITY })).toEqual([
      '9007199254740991',
      '9007199254740991',
    ]);
    for (const text of [...tokenArgs({ prompt: 1e21, completion: 5 }), tokenText(12.5)]) expect(text).toMatch(/^\d+$/);
  });
});
