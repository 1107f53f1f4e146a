import { ApiError } from '../../errors';
import type { ChatMessage } from '../adapter';
import { renderPrompt } from './prompt-rendering';

describe('renderPrompt', () => {
  const cases: Array<[string, ChatMessage[], string]> = [
    ['sends a single user message as its text alone', [{ role: 'user', content: 'Hello\nthere' }], 'Hello\nthere'],
    ['joins the text parts of a single user message', [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }], 'a\nb'],
    [
      'labels every message of a conversation, blocks separated by a blank line',
      [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello' },
        { role: 'user', content: 'And now?' },
      ],
      'System: Be brief.\n\nUser: Hi\n\nAssistant: Hello\n\nUser: And now?',
    ],
    ['labels a lone system message', [{ role: 'system', content: 'S' }], 'System: S'],
    ['renders null content as empty text', [{ role: 'user', content: 'q' }, { role: 'assistant', content: null }], 'User: q\n\nAssistant: '],
    [
      'joins content parts in a conversation too',
      [{ role: 'developer', content: 'D' }, { role: 'user', content: [{ type: 'input_text', text: 'x' }, { type: 'text', text: 'y' }] }],
      'Developer: D\n\nUser: x\ny',
    ],
  ];
  it.each(cases)('%s', (_name, messages, expected) => {
    expect(renderPrompt(messages)).toBe(expected);
  });

  it('rejects non-text content parts with a 400 naming the part', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: 'u' } }] }];
    expect(() => renderPrompt(messages)).toThrow(ApiError);
    expect(() => renderPrompt(messages)).toThrow(expect.objectContaining({ status: 400, param: 'messages[0].content[1]' }));
  });
});
