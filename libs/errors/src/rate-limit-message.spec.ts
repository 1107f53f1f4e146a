import { catalogMessage } from './error-catalog';
import { delayWords } from './rate-limit-message';

describe('rate_limit_exceeded messages', () => {
  it('words a token budget refusal as the OpenAI API does, naming the client, window, limit, used and requested', () => {
    expect(
      catalogMessage('rate_limit_exceeded', {
        budget: 'minute',
        client: 'research',
        limit: 10000,
        used: 9800,
        requested: 300,
        retryMs: 600,
      }),
    ).toBe(
      'Rate limit reached for client "research" on tokens per min (TPM): Limit 10000, Used 9800 (reserved by requests in flight included), Requested 300. Please try again in 600ms.',
    );
  });

  it('says a request over the whole budget can never fit, and how to fix it', () => {
    expect(
      catalogMessage('rate_limit_exceeded', {
        budget: 'day',
        client: 'c',
        limit: 5000,
        requested: 6000,
        tooLarge: true,
      }),
    ).toBe(
      'Request too large for client "c" on tokens per day (TPD): Limit 5000, Requested 6000. The request alone is larger than the whole budget, so it can never be admitted: lower max_tokens (or shorten the input), or raise the client\'s tokens_per_day.',
    );
  });

  it('keeps the upstream and CLI wordings', () => {
    expect(catalogMessage('rate_limit_exceeded', { retryAfterS: 3 })).toBe(
      'The upstream is rate limiting requests; retry after 3 s.',
    );
    expect(catalogMessage('rate_limit_exceeded', { cliAdapter: 'x', running: 1, waiting: 2 })).toContain('busy');
  });

  it.each([
    [0, '0ms'],
    [600.2, '601ms'],
    [1000, '1s'],
    [1501, '1.6s'],
    [59_999, '60s'],
    [125_000, '2m5s'],
    [3_612_000, '1h0m12s'],
  ])('words %p ms as %p', (ms, words) => {
    expect(delayWords(ms)).toBe(words);
  });
});
