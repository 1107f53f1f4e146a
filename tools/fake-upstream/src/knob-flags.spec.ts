import { parseKnobFlags } from './knobs';

describe('--knob name=value: default knobs of the fake upstream from its command line', () => {
  it('reads each knob as a whole number ≥ 0', () => {
    expect(parseKnobFlags(['delay_ms=2000', 'chunks=20', 'chunk_gap_ms=0'])).toEqual({
      delay_ms: 2000,
      chunks: 20,
      chunk_gap_ms: 0,
    });
    expect(parseKnobFlags([])).toEqual({});
  });

  it.each([
    ['delay=5', 'unknown knob "delay"'],
    ['delay_ms', 'whole number'],
    ['delay_ms=', 'whole number'],
    ['delay_ms=-1', 'whole number'],
    ['delay_ms=1.5', 'whole number'],
    ['delay_ms=abc', 'whole number'],
  ])('refuses %s, naming the flag', (flag, why) => {
    expect(() => parseKnobFlags([flag])).toThrow(`--knob ${flag}`);
    expect(() => parseKnobFlags([flag])).toThrow(why);
  });
});
