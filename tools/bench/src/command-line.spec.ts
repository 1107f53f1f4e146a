import { DEFAULT_SCENARIOS, parseCommandLine, SCENARIOS } from './command-line';

describe('bench command line: the instructions scenario', () => {
  it('is left out of a run without --scenarios, and runs alone when named', () => {
    expect(parseCommandLine([]).options.scenarios).toEqual(DEFAULT_SCENARIOS);
    expect(DEFAULT_SCENARIOS).not.toContain('instructions');
    expect(DEFAULT_SCENARIOS).toHaveLength(SCENARIOS.length - 1);
    expect(parseCommandLine(['--scenarios', 'instructions']).options.scenarios).toEqual(['instructions']);
  });

  it('takes its requests, warm-up, idle window and connections from flags, and its rounds from --rounds', () => {
    const { instructions } = parseCommandLine([
      '--instr-requests',
      '300',
      '--instr-warmup',
      '0',
      '--instr-idle-seconds',
      '1',
      '--instr-connections',
      '4',
      '--rounds',
      '5',
    ]).options;
    expect(instructions).toEqual({
      requests: 300,
      warmupRequests: 0,
      warmupLoads: 10,
      idleSeconds: 1,
      connections: 4,
      rounds: 5,
    });
  });

  it('has full and quick defaults', () => {
    expect(parseCommandLine([]).options.instructions).toMatchObject({
      requests: 2000,
      warmupRequests: 10_000,
      idleSeconds: 5,
      connections: 8,
      rounds: 3,
    });
    expect(parseCommandLine(['--quick']).options.instructions).toMatchObject({
      requests: 500,
      warmupRequests: 3000,
      rounds: 1,
    });
  });

  it('refuses a window without requests', () => {
    expect(() => parseCommandLine(['--instr-requests', '0'])).toThrow(/--instr-requests must be an integer ≥ 1/);
  });

  it('accepts the express floor as a target', () => {
    expect(parseCommandLine(['--targets', 'express-floor']).options.targets).toEqual(['direct', 'express-floor']);
  });
});

describe('bench command line: the redis-instructions scenario', () => {
  it('runs by default and alone when named', () => {
    expect(DEFAULT_SCENARIOS).toContain('redis-instructions');
    expect(parseCommandLine(['--scenarios', 'redis-instructions']).options.scenarios).toEqual(['redis-instructions']);
  });

  it('takes its requests from --redis-instr-requests, its idle window from --idle-seconds and its rounds from --rounds', () => {
    expect(
      parseCommandLine(['--redis-instr-requests', '300', '--idle-seconds', '1', '--rounds', '2']).options
        .redisInstructions,
    ).toEqual({ requests: 300, warmupRequests: 1000, idleSeconds: 1, rounds: 2 });
    expect(parseCommandLine(['--quick']).options.redisInstructions).toEqual({
      requests: 500,
      warmupRequests: 300,
      idleSeconds: 2,
      rounds: 1,
    });
    expect(() => parseCommandLine(['--redis-instr-requests', '0'])).toThrow(
      /--redis-instr-requests must be an integer ≥ 1/,
    );
  });
});
