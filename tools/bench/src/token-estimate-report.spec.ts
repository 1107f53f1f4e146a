import { estimateRatio, fmtError, tokenEstimateSection } from './token-estimate-report';

describe('token-estimate report', () => {
  it('states the error relative to the real count, signed, and — when there is none', () => {
    expect(fmtError(estimateRatio({ estimate: 133 }, 100))).toBe('+33%');
    expect(fmtError(estimateRatio({ estimate: 80 }, 100))).toBe('-20%');
    expect(fmtError(estimateRatio({ estimate: 5 }, 0))).toBe('—');
  });

  it('names the samples the estimate counts low', () => {
    const sample = { kind: 'k', bytes: 3, estimateUs: 1, tokenizerUs: 10 };
    const md = tokenEstimateSection({
      vocabularyLoadMs: 12,
      samples: [
        { ...sample, name: 'prose', estimate: 120, o200k: 100, cl100k: 101 },
        { ...sample, name: 'digits', estimate: 90, o200k: 100, cl100k: 80 },
      ],
    });
    expect(md).toContain('| prose | k | 3 | 100 | 101 | 120 | +20% | +19% |');
    expect(md).toContain('under a real count for: digits.');
  });
});
