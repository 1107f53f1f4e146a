import { startFakeUpstream } from './index';

describe('fake upstream call journal', () => {
  it('records each call with its tag, start and end when journal is on, and forgets them on reset', async () => {
    const up = await startFakeUpstream({ journal: true });
    try {
      const call = (tag: number | undefined, delay: number) =>
        fetch(`${up.url}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'm',
            messages: [{ role: 'user', content: 'x' }],
            fake: { delay_ms: delay, ...(tag !== undefined ? { tag } : {}) },
          }),
        }).then((r) => r.text());
      const before = Date.now();
      await Promise.all([call(7, 80), call(3, 10), call(undefined, 0)]);
      const calls = up.calls();
      expect(calls.map((c) => c.tag).sort()).toEqual([3, 7, undefined]);
      for (const c of calls) {
        expect(c.model).toBe('m');
        expect(c.startedAt).toBeGreaterThanOrEqual(before);
        expect(c.endedAt).toBeGreaterThanOrEqual(c.startedAt);
      }
      const slow = calls.find((c) => c.tag === 7);
      expect((slow?.endedAt ?? 0) - (slow?.startedAt ?? 0)).toBeGreaterThanOrEqual(70);
      // The same journal over HTTP, for a fake upstream in a process of its own (the bench's `flow` scenario).
      expect(await (await fetch(`${up.origin}/__calls`)).json()).toEqual(calls);
      up.reset();
      expect(up.calls()).toEqual([]);
      expect(await (await fetch(`${up.origin}/__calls`)).json()).toEqual([]);
    } finally {
      await up.close();
    }
  });

  it('keeps no journal by default', async () => {
    const up = await startFakeUpstream();
    try {
      await fetch(`${up.url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], fake: { tag: 1 } }),
      });
      expect(up.calls()).toEqual([]);
    } finally {
      await up.close();
    }
  });
});
