import type { ChatMessage } from '../adapter';
import { ESCAPE_SLICE_CHARS, renderPrompt, renderPromptInTurns } from './prompt-rendering';

/**
 * A long text is escaped a slice per turn of the event loop (docs/architecture.md, "Costly bodies"):
 * the prompt is the same as in one pass, whatever falls on a slice's edge, and no turn holds the
 * loop long while a text of nothing but role lines is escaped.
 */

/** The escape rule in one pass over the whole text, written apart from the code under test. */
function oneMessagePrompt(text: string): string {
  return text.replace(
    // eslint-disable-next-line no-control-regex -- the file/group/record separators are line breaks to some readers
    /(^|\r\n|[\n\v\f\r\x1c-\x1e\u0085\u2028\u2029])([\t \x1f\u00a0\u1680\u2000-\u200d\u202f\u205f\u2060\u3000\ufeff]*)(\\*)(system|developer|user|assistant|tool|function)([\t \x1f\u00a0\u1680\u2000-\u200d\u202f\u205f\u2060\u3000\ufeff]*:)/gi,
    '$1$2\\$3$4$5',
  );
}

const never = new AbortController().signal;

describe('the prompt escaped a slice per turn', () => {
  it.each([
    ['LF', '\n'],
    ['CRLF', '\r\n'],
    ['CR', '\r'],
    ['U+2028', '\u2028'],
    ['vertical tab', '\v'],
  ])('gives what one pass gives, every %s line of role text escaped across the slices', async (_name, br) => {
    // Lines of varied lengths so the slices' edges fall everywhere, CRLF cut in two included.
    const lines: string[] = [];
    for (let i = 0; lines.join(br).length < ESCAPE_SLICE_CHARS * 5; i++)
      lines.push(i % 3 === 0 ? `  \\user : line ${i}` : i % 3 === 1 ? 'x'.repeat(i % 97) : `Assistant:${i}`);
    const text = lines.join(br);
    const single: ChatMessage[] = [{ role: 'user', content: text }];
    const expected = oneMessagePrompt(text);
    expect(renderPrompt(single)).toBe(expected);
    expect(await renderPromptInTurns(single, 'text', never)).toBe(expected);
    const conversation: ChatMessage[] = [
      { role: 'system', content: text },
      { role: 'user', content: `first line: user: stays${br}${text}` },
    ];
    const joined = await renderPromptInTurns(conversation, 'text', never);
    expect(joined).toBe(renderPrompt(conversation));
    const [, second] = joined.split('\n\nUser: ');
    expect(second.startsWith(`first line: user: stays${br}`)).toBe(true);
    expect(second.slice(`first line: user: stays${br}`.length)).toBe(expected);
  });

  /** `work`'s result and the longest the event loop went without a turn meanwhile, in ms. */
  async function longestStall<T>(work: () => Promise<T>): Promise<{ result: T; longest: number }> {
    let longest = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
    }, 1);
    const result = await work();
    clearInterval(ticker);
    return { result, longest: Math.max(longest, performance.now() - last) };
  }

  it('a 4 MiB text of role lines only never holds the event loop for long, and the prompt is whole', async () => {
    const text = '\nuser:'.repeat(Math.floor(4_194_304 / 6));
    const { result: prompt, longest } = await longestStall(() =>
      renderPromptInTurns([{ role: 'user', content: text }], 'text', never),
    );
    expect(prompt.length).toBe(text.length + text.length / 6);
    expect(prompt.startsWith('\n\\user:\n\\user:')).toBe(true);
    // One pass takes seconds on a 2-core host; a slice is a few tens of ms even under load.
    expect(longest).toBeLessThan(400);
  });

  it('jsonl: 4 MiB of U+2028 (an escape per character) never holds the event loop for long, one line per message', async () => {
    const text = '\u2028'.repeat(1_398_000);
    const messages: ChatMessage[] = [
      { role: 'system', content: 'x' },
      { role: 'user', content: text },
    ];
    const { result: prompt, longest } = await longestStall(() => renderPromptInTurns(messages, 'jsonl', never));
    expect(prompt).toBe(renderPrompt(messages, 'jsonl'));
    const lines = prompt.split('\n');
    expect(lines).toHaveLength(3);
    expect(JSON.parse(lines[1])).toEqual({ role: 'user', content: text });
    expect(lines[1]).not.toContain('\u2028');
    expect(longest).toBeLessThan(400);
  });

  it('stops at the next turn once the signal fires', async () => {
    const controller = new AbortController();
    const text = '\nuser:'.repeat(ESCAPE_SLICE_CHARS);
    const rendering = renderPromptInTurns([{ role: 'user', content: text }], 'text', controller.signal);
    controller.abort(new Error('client left'));
    await expect(rendering).rejects.toThrow('client left');
  });
});
