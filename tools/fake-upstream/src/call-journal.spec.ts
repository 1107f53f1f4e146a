import { startFakeUpstream, type FakeUpstream } from './index';

/** Waits until `n` calls are journaled and have ended (a cut stream ends when its socket closes). */
async function waitForEnds(up: FakeUpstream, n: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const calls = up.calls();
    if (calls.length === n && calls.every((c) => c.endedAt !== null)) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`the journal never held ${n} ended calls: ${JSON.stringify(up.calls())}`);
}

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

  it('records the usage each answer reported: a JSON answer (chat, Responses, embeddings), a stream that asked for it and reached its end; none otherwise', async () => {
    const up = await startFakeUpstream({ journal: true });
    try {
      const call = (tag: number, extra: Record<string, unknown>, fake: Record<string, number> = {}) =>
        fetch(`${up.url}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'm',
            messages: [{ role: 'user', content: 'twelve chars' }],
            ...extra,
            fake: { tag, ...fake },
          }),
        }).then((r) => r.text());
      const json = JSON.parse(await call(1, {})) as { usage: { prompt_tokens: number; completion_tokens: number } };
      const streamed = await call(2, { stream: true, stream_options: { include_usage: true } });
      await call(3, { stream: true });
      await call(4, { stream: true, stream_options: { include_usage: true } }, { cut_after: 1 }).catch(() => '');
      await call(5, {}, { status: 500 });
      const responses = (await fetch(`${up.url}/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', input: 'twelve chars', fake: { tag: 6 } }),
      }).then((r) => r.json())) as { usage: { input_tokens: number; output_tokens: number } };
      const embeddings = (await fetch(`${up.url}/embeddings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', input: ['twelve chars', 'and more of them'], fake: { tag: 7 } }),
      }).then((r) => r.json())) as { usage: { prompt_tokens: number } };
      await waitForEnds(up, 7);

      const byTag = new Map(up.calls().map((c) => [c.tag, c.usage]));
      const expected = { prompt: json.usage.prompt_tokens, completion: json.usage.completion_tokens };
      expect(expected.prompt).toBe(3);
      expect(expected.completion).toBeGreaterThan(0);
      expect(byTag.get(1)).toEqual(expected);
      // The stream's usage chunk says the same.
      expect(streamed).toContain(`"usage":{"prompt_tokens":3,"completion_tokens":${expected.completion},`);
      expect(byTag.get(2)).toEqual(expected);
      expect(byTag.get(3)).toBeUndefined();
      expect(byTag.get(4)).toBeUndefined();
      expect(byTag.get(5)).toBeUndefined();
      expect(byTag.get(6)).toEqual({ prompt: responses.usage.input_tokens, completion: responses.usage.output_tokens });
      // An embeddings answer reports prompt tokens only: the two inputs' tokens.
      expect(embeddings.usage.prompt_tokens).toBe(7);
      expect(byTag.get(7)).toEqual({ prompt: embeddings.usage.prompt_tokens, completion: 0 });
      expect(await (await fetch(`${up.origin}/__calls`)).json()).toEqual(up.calls());
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
