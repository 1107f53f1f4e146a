import { redisInstructionsSection, type RedisInstructionsResults } from './redis-instructions';
import { spread } from './stats';

const options = { requests: 1000, warmupRequests: 100, idleSeconds: 5, rounds: 2 };
/** A variant's row from its windows' instructions (1000 requests, 10 s each) and an idle rate. */
const row = (variant: 'pooled' | 'pooled-clients' | 'pooled-budgets', instructions: number[], idlePerS: number) => ({
  variant,
  rounds: instructions.map((i) => ({ requests: 1000, ok: 1000, failures: 0, instructions: i, seconds: 10 })),
  instructionsPerRequest: spread(instructions.map((i) => i / 1000)),
  idleInstructionsPerS: idlePerS,
  netInstructionsPerRequest: spread(instructions.map((i) => (i - idlePerS * 10) / 1000)),
});

describe('redis-instructions report', () => {
  it('shows k instructions per request, net of idle, and what clients and budgets add over pooled', () => {
    const results: RedisInstructionsResults = {
      options,
      rows: [
        row('pooled', [230e6, 232e6], 1e6),
        row('pooled-clients', [265e6, 267e6], 1e6),
        row('pooled-budgets', [420e6, 424e6], 2e6),
      ],
    };
    const lines = redisInstructionsSection(results).split('\n');
    expect(lines[2]).toBe('| pooled | 231.0 (230.0…232.0) | 221.0 (220.0…222.0) | — | 1.00 | 0 |');
    expect(lines[3]).toBe('| pooled-clients | 266.0 (265.0…267.0) | 256.0 (255.0…257.0) | +35.0 | 1.00 | 0 |');
    expect(lines[4]).toBe('| pooled-budgets | 422.0 (420.0…424.0) | 402.0 (400.0…404.0) | +181.0 | 2.00 | 0 |');
  });

  it('says why nothing was measured, and shows a variant that failed', () => {
    expect(redisInstructionsSection({ options, rows: [], error: 'valgrind not on the PATH' })).toBe(
      'not measured: valgrind not on the PATH',
    );
    const { idleInstructionsPerS: _, ...unmeasured } = row('pooled-budgets', [], 0);
    const failed = { ...unmeasured, error: 'gateway did not start' };
    const text = redisInstructionsSection({ options, rows: [row('pooled', [230e6], 0), failed] });
    expect(text).toContain('| pooled-budgets | failed: gateway did not start | — | — | — | 0 |');
  });
});
