import { findTooDeep, MAX_BODY_DEPTH } from './json-depth';

describe('findTooDeep counts nesting without recursion', () => {
  it.each([
    ['a scalar', 1, 1, null],
    ['an empty object', {}, 1, null],
    ['an object is level 1', { a: 1, b: 'x' }, 1, null],
    ['an array inside is level 2', { a: [1] }, 1, { kind: 'depth', field: 'a' }],
    ['a limit of 2 allows it', { a: [1] }, 2, null],
    ['empty containers count', { a: [[]] }, 2, { kind: 'depth', field: 'a' }],
    ['strings with brackets are text, not nesting', { a: '[[[[{{{{' }, 1, null],
    [
      'names the field that goes too deep, not the first one',
      { a: [1], b: { c: { d: {} } } },
      3,
      { kind: 'depth', field: 'b' },
    ],
    ['an array body has no field', [[[1]]], 2, { kind: 'depth', field: null }],
  ] as const)('%s', (_what, value, limit, expected) => {
    expect(findTooDeep(value, limit)).toEqual(expected);
  });

  it.each([
    ['a top-level field', JSON.parse('{"max_tokens": 1e999}'), { kind: 'number', field: 'max_tokens' }],
    [
      'a nested one, named by its top-level field',
      JSON.parse('{"tools": [{"x": {"y": -1e400}}]}'),
      { kind: 'number', field: 'tools' },
    ],
    ['the body itself', JSON.parse('1e999'), { kind: 'number', field: null }],
    ['large but finite numbers pass', JSON.parse('{"a": 1.7976931348623157e308, "b": [-5e-324]}'), null],
  ])('finds a number JSON.parse made infinite: %s', (_what, value, expected) => {
    expect(findTooDeep(value)).toEqual(expected);
  });

  it(`defaults to MAX_BODY_DEPTH (${MAX_BODY_DEPTH}) levels`, () => {
    const at = (depth: number) => JSON.parse(`{"x":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`) as unknown;
    expect(findTooDeep(at(MAX_BODY_DEPTH))).toBeNull();
    expect(findTooDeep(at(MAX_BODY_DEPTH + 1))).toEqual({ kind: 'depth', field: 'x' });
  });

  it('checks a value nested 1,000,000 deep without overflowing, stopping at the limit', () => {
    const depth = 1_000_000;
    const arrays = JSON.parse(`{"deep":${'['.repeat(depth)}${']'.repeat(depth)}}`) as unknown;
    const objects = JSON.parse(`{"deep":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`) as unknown;
    expect(() => JSON.stringify(arrays)).toThrow(RangeError); // what the check protects the gateway from
    expect(findTooDeep(arrays)).toEqual({ kind: 'depth', field: 'deep' });
    expect(findTooDeep(objects)).toEqual({ kind: 'depth', field: 'deep' });
  });

  it('accepts wide, shallow values of any size', () => {
    const wide = {
      messages: Array.from({ length: 50_000 }, (_, i) => ({
        role: 'user',
        content: [{ type: 'text', text: String(i) }],
      })),
    };
    expect(findTooDeep(wide)).toBeNull();
  });
});
