import OpenAI from 'openai';
import { UpstreamError } from '../../errors';
import { chatCompletionToResponse } from './chat-completion-to-response';

/** An `openai` client whose every request is answered with `body` as JSON (no network). */
function clientAnswering(body: unknown): OpenAI {
  return new OpenAI({
    apiKey: 'test',
    baseURL: 'http://gateway.test/v1',
    maxRetries: 0,
    fetch: async () =>
      new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } }),
  });
}

const completion = (content: string | null, finishReason = 'stop', usage?: Record<string, number>) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: 'upstream-name',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: finishReason }],
  ...(usage ? { usage } : {}),
});

describe('chatCompletionToResponse', () => {
  it('builds a completed Response with one assistant message and mapped usage', () => {
    const response = chatCompletionToResponse(
      completion('Hello!', 'stop', { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 }),
      'public-name',
    );
    expect(response).toMatchObject({
      object: 'response',
      created_at: 1_700_000_000,
      status: 'completed',
      model: 'public-name',
      error: null,
      incomplete_details: null,
      output: [
        {
          type: 'message',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: 'Hello!', annotations: [] }],
        },
      ],
      usage: { input_tokens: 5, output_tokens: 2, total_tokens: 7 },
    });
    expect(response.id).toMatch(/^resp_[0-9a-f]{48}$/);
    expect(response.output[0].id).toMatch(/^msg_[0-9a-f]{48}$/);
  });

  it.each([
    ['stop', 'completed', null],
    ['length', 'incomplete', { reason: 'max_output_tokens' }],
    ['content_filter', 'incomplete', { reason: 'content_filter' }],
    ['tool_calls', 'completed', null],
  ])('maps finish_reason %s to status %s', (finishReason, status, details) => {
    const response = chatCompletionToResponse(completion('x', finishReason), 'm');
    expect(response.status).toBe(status);
    expect(response.output[0].status).toBe(status);
    expect(response.incomplete_details).toEqual(details);
  });

  it('treats null content as empty text and missing usage as null', () => {
    const response = chatCompletionToResponse(completion(null), 'm');
    expect(response.output[0].content[0].text).toBe('');
    expect(response.usage).toBeNull();
  });

  it.each([
    ['an error body', { error: { message: 'boom' } }],
    ['no choices', { object: 'chat.completion', choices: [] }],
    ['non-text content', { choices: [{ message: { content: [{ type: 'text', text: 'x' }] } }] }],
    ['not an object', 'hello'],
  ])('rejects %s with a 502', (_name, body) => {
    expect(() => chatCompletionToResponse(body, 'm')).toThrow(UpstreamError);
    expect(() => chatCompletionToResponse(body, 'm')).toThrow(
      expect.objectContaining({ status: 502, code: 'upstream_error' }),
    );
  });

  it('gives the openai client a working response.output_text', async () => {
    const body = chatCompletionToResponse(completion('Hello from chat'), 'public-name');
    const response = await clientAnswering(body).responses.create({ model: 'public-name', input: 'hi' });
    expect(response.output_text).toBe('Hello from chat');
    expect(response.model).toBe('public-name');
  });

  it.each([
    ['reasoning', { reasoning: 'Thinking.' }],
    ['reasoning_content', { reasoning_content: 'Thinking.' }],
  ])('puts the message %s in a reasoning item before the message, with its token count', (_field, fields) => {
    const chat = {
      ...completion('Answer.', 'stop', { prompt_tokens: 3, completion_tokens: 9, total_tokens: 12 }),
      usage: {
        prompt_tokens: 3,
        completion_tokens: 9,
        total_tokens: 12,
        completion_tokens_details: { reasoning_tokens: 4 },
      },
    };
    Object.assign(chat.choices[0].message, fields);
    const response = chatCompletionToResponse(chat, 'm');
    expect(response.output).toEqual([
      {
        type: 'reasoning',
        id: expect.stringMatching(/^rs_[0-9a-f]{48}$/),
        status: 'completed',
        summary: [],
        content: [{ type: 'reasoning_text', text: 'Thinking.' }],
      },
      expect.objectContaining({ type: 'message', content: [expect.objectContaining({ text: 'Answer.' })] }),
    ]);
    expect(response.usage?.output_tokens_details).toEqual({ reasoning_tokens: 4 });
  });

  it('marks the reasoning incomplete when the token limit cut it before any answer; no item for empty reasoning', () => {
    const cut = completion(null, 'length');
    Object.assign(cut.choices[0].message, { reasoning: 'Thinking' });
    expect(chatCompletionToResponse(cut, 'm').output.map((item) => [item.type, item.status])).toEqual([
      ['reasoning', 'incomplete'],
      ['message', 'incomplete'],
    ]);
    const empty = completion('x');
    Object.assign(empty.choices[0].message, { reasoning: '', reasoning_content: null });
    expect(chatCompletionToResponse(empty, 'm').output.map((item) => item.type)).toEqual(['message']);
  });
});
