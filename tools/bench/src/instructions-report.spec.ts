import { MISSING_TOOLS_NOTE, perRequest, type InstructionsResults, type InstructionsRow } from './instructions-results';
import { INSTRUCTIONS_HEADER, instructionsRows, instructionsSection } from './instructions-report';
import { spread } from './stats';

const OPTIONS = { requests: 2000, warmupRequests: 10_000, warmupLoads: 10, idleSeconds: 5, connections: 8, rounds: 2 };

/** A row measured in two windows of 2,000 requests, 20 s each, with `kPerRequest` k instructions per request. */
function row(target: InstructionsRow['target'], kPerRequest: [number, number], idlePerS: number): InstructionsRow {
  const rounds = kPerRequest.map((k) => ({
    requests: 2000,
    ok: 2000,
    failures: 0,
    instructions: k * 2e6,
    seconds: 20,
  }));
  const { gross, net } = perRequest(rounds, idlePerS);
  return {
    target,
    label: target,
    rounds,
    instructionsPerRequest: gross,
    idleInstructionsPerS: idlePerS,
    netInstructionsPerRequest: net,
  };
}

const syscalls = (requests: number) => ({
  requests,
  ok: requests,
  failures: 1,
  calls: 5 * requests,
  perRequest: 5,
  errors: 0,
  syscalls: [
    { syscall: 'read', calls: 2 * requests, errors: 0, seconds: 0 },
    { syscall: 'writev', calls: 2 * requests, errors: 0, seconds: 0 },
    { syscall: 'epoll_pwait', calls: requests, errors: 0, seconds: 0 },
  ],
});

const results = (rows: InstructionsRow[], missing: string[] = []): InstructionsResults => ({
  options: OPTIONS,
  tools: { valgrind: 'valgrind-3.19.0', strace: 'strace -- version 6.1' },
  nodeArgs: ['--predictable'],
  missing,
  rows,
});

describe('instructions per request', () => {
  it('takes the idle background of each window off, per request', () => {
    const rounds = [
      { requests: 2000, ok: 2000, failures: 0, instructions: 340e6, seconds: 20 },
      { requests: 2000, ok: 2000, failures: 0, instructions: 344e6, seconds: 10 },
    ];
    // Idle 100,000/s: 2e6 and 1e6 instructions of background, i.e. 1,000 and 500 per request.
    expect(perRequest(rounds, 100_000)).toEqual({
      gross: { median: 171_000, min: 170_000, max: 172_000, n: 2 },
      net: { median: 170_250, min: 169_000, max: 171_500, n: 2 },
    });
    expect(perRequest(rounds, undefined).net.n).toBe(0);
  });
});

describe('instructions report', () => {
  it('puts every target against the net median of the Node floor', () => {
    const floor = { ...row('node-floor', [170, 172], 100_000), syscalls: syscalls(2000) };
    const memory = row('memory', [1200, 1260], 300_000);
    const rows = instructionsRows(results([floor, memory]));
    expect(rows[0]).toEqual([
      'node-floor',
      '171 (170…172)',
      '170 (169…171)',
      '(floor)',
      '—',
      '0.10',
      '5.00',
      'read 2.00, writev 2.00, epoll_pwait 1.00',
      '1',
    ]);
    // Net: 1,200 − 3 and 1,260 − 3 k (300,000/s × 20 s over 2,000 requests); 1,227 / 170 and 1,227 − 170.
    expect(rows[1]).toEqual([
      'memory',
      '1230 (1200…1260)',
      '1227 (1197…1257)',
      '7.22×',
      '+1057',
      '0.30',
      '—',
      '—',
      '0',
    ]);
    expect(rows[1]).toHaveLength(INSTRUCTIONS_HEADER.length);
  });

  it('shows what failed, and no ratio without a measured floor', () => {
    const floor: InstructionsRow = {
      target: 'node-floor',
      label: 'node-floor',
      rounds: [],
      instructionsPerRequest: spread([]),
      netInstructionsPerRequest: spread([]),
      error: 'node-floor did not get ready within 240000 ms',
      syscallError: 'strace could not attach',
    };
    const rows = instructionsRows(results([floor, row('memory', [1200, 1260], 0)]));
    expect(rows[0].slice(0, 7)).toEqual([
      'node-floor',
      'failed: node-floor did not get ready within 240000 ms',
      '—',
      '—',
      '—',
      '—',
      'failed: strace could not attach',
    ]);
    expect(rows[1].slice(2, 5)).toEqual(['1230 (1200…1260)', '—', '—']);
  });

  it('says what to install when a tool is missing, and only that when nothing was measured', () => {
    expect(instructionsSection(results([], ['valgrind', 'callgrind_control', 'strace']))).toBe(
      `${MISSING_TOOLS_NOTE} (not on the PATH: valgrind, callgrind_control, strace).`,
    );
    const partial = instructionsSection(results([row('node-floor', [170, 172], 0)], ['strace']));
    expect(partial.startsWith(`${MISSING_TOOLS_NOTE} (not on the PATH: strace).`)).toBe(true);
    expect(partial).toContain('| node-floor | 171 (170…172) |');
    expect(partial).toContain('not Redis');
  });
});
