import { callgrindInstructions, sumCallgrindDumps } from './callgrind-summary';

/** The head and tail of a dump as callgrind 3.19 writes it with `--dump-instr=no`. */
const dump = (events: string, summary: string | undefined, totals: string | undefined) =>
  [
    '# callgrind format',
    'version: 1',
    'creator: callgrind-3.19.0',
    'pid: 23355',
    'cmd:  node bare-proxy.js',
    'part: 1',
    '',
    'desc: Trigger: dump',
    '',
    'positions: line',
    `events: ${events}`,
    ...(summary === undefined ? [] : [`summary: ${summary}`]),
    '',
    'ob=(1) /usr/bin/node',
    'fl=(1) ???',
    'fn=(1) 0x0000000000e1b8a0',
    '0 120',
    ...(totals === undefined ? [] : [`totals: ${totals}`]),
  ].join('\n');

describe('callgrind dump totals', () => {
  it('reads Ir from the summary line', () => {
    expect(callgrindInstructions(dump('Ir', '12611991', '12611991'))).toBe(12611991);
  });

  it('falls back to the totals line when there is no summary', () => {
    expect(callgrindInstructions(dump('Ir', undefined, '4500'))).toBe(4500);
  });

  it('takes Ir at its position among several events', () => {
    expect(callgrindInstructions(dump('Dr Ir Dw', '7 900 3', '7 900 3'))).toBe(900);
  });

  it('counts a trailing event left out of the line as 0', () => {
    expect(callgrindInstructions(dump('Dr Ir', '7', '7'))).toBe(0);
  });

  it('says undefined while the dump has no total yet', () => {
    expect(callgrindInstructions(dump('Ir', undefined, undefined))).toBeUndefined();
  });

  it('refuses a dump without instruction counting', () => {
    expect(() => callgrindInstructions(dump('Dr Dw', '1 2', '1 2'))).toThrow(/counts Dr Dw, not Ir/);
  });

  it('refuses a total that is not a count', () => {
    expect(() => callgrindInstructions(dump('Ir', '-5', '-5'))).toThrow(/not a count/);
  });

  it('sums the files of one window and names a file without a total', () => {
    const files = [
      { name: 'cg.out.1.1', text: dump('Ir', '1000', '1000') },
      { name: 'cg.out.1.2', text: dump('Ir', '234', '234') },
    ];
    expect(sumCallgrindDumps(files)).toBe(1234);
    expect(() => sumCallgrindDumps([...files, { name: 'cg.out.1.3', text: dump('Ir', undefined, undefined) }])).toThrow(
      /cg\.out\.1\.3 has no summary or totals line/,
    );
  });
});
