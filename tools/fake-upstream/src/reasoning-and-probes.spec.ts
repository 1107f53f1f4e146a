import { startFakeUpstream, type FakeUpstream } from './index';

/** The fake's reasoning knobs, its answers under a JSON response_format, and `probesWaitForWork`. */

let up: FakeUpstream;
afterEach(() => up.close());

const chat = (extra: object) =>
  fetch(`${up.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra }),
  });

describe('fake upstream: reasoning models and structured outputs', () => {
  beforeEach(async () => {
    up = await startFakeUpstream({ name: 'up' });
  });

  it.each([
    ['reasoning', { reasoning: 1 }, ['reasoning']],
    ['reasoning_content', { reasoning_content: 1 }, ['reasoning_content']],
    ['both', { reasoning: 1, reasoning_content: 1 }, ['reasoning_content', 'reasoning']],
  ])('%s: the message carries the reasoning in its field(s), counted in usage', async (_w, fake, fields) => {
    const body = (await (await chat({ fake })).json()) as {
      choices: Array<{ message: Record<string, unknown> }>;
      usage: { completion_tokens: number; completion_tokens_details: { reasoning_tokens: number } };
    };
    for (const field of fields) expect(body.choices[0].message[field]).toBe('thinking about: hi');
    expect(body.usage.completion_tokens_details.reasoning_tokens).toBe(5);
  });

  it('streams the reasoning chunks before the content chunks', async () => {
    const text = await (await chat({ stream: true, fake: { reasoning: 2, chunks: 1 } })).text();
    const deltas = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => (JSON.parse(e.slice(6)) as { choices: Array<{ delta: Record<string, string> }> }).choices[0]?.delta)
      .filter((d) => d && (d.reasoning || d.content));
    expect(deltas.map((d) => (d.reasoning ? ['reasoning', d.reasoning] : ['content', d.content]))).toEqual([
      ['reasoning', 'thinking '],
      ['reasoning', 'about: hi'],
      ['content', 'echo: hi [model=m upstream=up]'],
    ]);
  });

  it.each(['json_object', 'json_schema'])('answers a JSON document under response_format %s', async (type) => {
    const body = (await (await chat({ response_format: { type } })).json()) as {
      choices: Array<{ message: { content: string } }>;
    };
    expect(JSON.parse(body.choices[0].message.content)).toEqual({ echo: 'hi', model: 'm', upstream: 'up' });
  });
});

describe('fake upstream: probesWaitForWork', () => {
  it('answers a probe only once the inference requests in flight are done', async () => {
    up = await startFakeUpstream({ name: 'busy', probesWaitForWork: true });
    expect((await fetch(`${up.origin}/health`)).status).toBe(200);
    const work = chat({ fake: { delay_ms: 400 } });
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    const probes = await Promise.all(['/health', '/api/version', '/v1/models'].map((p) => fetch(`${up.origin}${p}`)));
    expect(probes.map((p) => p.status)).toEqual([200, 200, 200]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect((await work).status).toBe(200);
  });
});
