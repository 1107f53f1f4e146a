import { closestName } from './closest-name';

describe('closestName (did-you-mean hints)', () => {
  it.each([
    ['suggests a key with one letter missing', 'max_concurency', 'max_concurrency'],
    ['suggests a key with two letters swapped', 'adpater', 'adapter'],
    ['ignores case', 'Category', 'category'],
    ['suggests nothing for an unrelated word', 'colour', undefined],
  ])('%s', (_rule, word, expected) => {
    expect(closestName(word, ['id', 'category', 'adapter', 'models', 'max_concurrency', 'max_queued', 'enabled'])).toBe(
      expected,
    );
  });
});
