import { ApiError } from '../../errors';
import type { ChatRequest, ResponsesRequest } from '../adapter';
import { responsesToChat } from './responses-to-chat';

describe('responsesToChat', () => {
  const cases: Array<[string, ResponsesRequest, ChatRequest]> = [
    [
      'turns a string input into one user message',
      { model: 'm', input: 'hi' },
      { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
    ],
    [
      'puts instructions first as a system message',
      { model: 'm', input: 'hi', instructions: 'Be brief.' },
      {
        model: 'm',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'hi' },
        ],
      },
    ],
    [
      'maps message items with string and text-part content, joining parts with a newline',
      {
        model: 'm',
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'a' },
              { type: 'input_text', text: 'b' },
            ],
          },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'c' }] },
          { role: 'developer', content: 'd' },
          { role: 'user', content: 'e' },
        ],
      },
      {
        model: 'm',
        messages: [
          { role: 'user', content: 'a\nb' },
          { role: 'assistant', content: 'c' },
          { role: 'system', content: 'd' },
          { role: 'user', content: 'e' },
        ],
      },
    ],
    [
      'maps max_output_tokens to max_tokens and passes temperature, top_p and user',
      { model: 'm', input: 'x', max_output_tokens: 42, temperature: 0.2, top_p: 0.9, user: 'u1', store: true },
      {
        model: 'm',
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 42,
        temperature: 0.2,
        top_p: 0.9,
        user: 'u1',
      },
    ],
    [
      'keeps stream and asks for usage in the stream',
      { model: 'm', input: 'x', stream: true },
      { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true, stream_options: { include_usage: true } },
    ],
    [
      'keeps stream: false',
      { model: 'm', input: 'x', stream: false },
      { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: false },
    ],
    [
      'maps a json_schema text format to response_format',
      {
        model: 'm',
        input: 'x',
        text: { format: { type: 'json_schema', name: 'n', schema: { type: 'object' }, strict: true } },
      },
      {
        model: 'm',
        messages: [{ role: 'user', content: 'x' }],
        response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'object' }, strict: true } },
      },
    ],
    [
      'maps a json_object text format and ignores a plain text one',
      { model: 'm', input: 'x', text: { format: { type: 'json_object' } } },
      { model: 'm', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_object' } },
    ],
    [
      'leaves out reasoning items (a previous answer sent back) and keeps its message',
      {
        model: 'm',
        input: [
          { role: 'user', content: 'a' },
          { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'hmm' }] },
          {
            type: 'message',
            id: 'msg_1',
            status: 'completed',
            role: 'assistant',
            content: [{ type: 'output_text', text: 'b', annotations: [] }],
          },
          { role: 'user', content: 'c' },
        ],
      },
      {
        model: 'm',
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
          { role: 'user', content: 'c' },
        ],
      },
    ],
    [
      'maps a json_schema description too, and a plain text format to nothing',
      { model: 'm', input: 'x', text: { format: { type: 'json_schema', name: 'n', schema: {}, description: 'd' } } },
      {
        model: 'm',
        messages: [{ role: 'user', content: 'x' }],
        response_format: { type: 'json_schema', json_schema: { name: 'n', schema: {}, description: 'd' } },
      },
    ],
    [
      'accepts an empty tools list',
      { model: 'm', input: 'x', tools: [] },
      { model: 'm', messages: [{ role: 'user', content: 'x' }] },
    ],
  ];
  it.each(cases)('%s', (_name, req, expected) => {
    expect(responsesToChat(req)).toEqual(expected);
  });

  const rejected: Array<[string, ResponsesRequest, string]> = [
    ['rejects a missing input', { model: 'm' }, 'input'],
    ['rejects an empty input', { model: 'm', input: '' }, 'input'],
    ['rejects an input that is neither string nor list', { model: 'm', input: 3 as unknown as string }, 'input'],
    [
      'rejects function call items',
      { model: 'm', input: [{ type: 'function_call_output', call_id: 'c', output: 'x' }] },
      'input[0].type',
    ],
    [
      'rejects an input of reasoning items only',
      { model: 'm', input: [{ type: 'reasoning', id: 'rs_1', summary: [] }] },
      'input',
    ],
    ['rejects a text that is not an object', { model: 'm', input: 'x', text: 'json' }, 'text'],
    [
      'rejects a text.format that is not an object',
      { model: 'm', input: 'x', text: { format: 'json' } },
      'text.format',
    ],
    [
      'rejects a json_schema description that is not a string',
      { model: 'm', input: 'x', text: { format: { type: 'json_schema', name: 'n', schema: {}, description: 1 } } },
      'text.format.description',
    ],
    ['rejects an unknown role', { model: 'm', input: [{ role: 'wizard', content: 'x' }] }, 'input[0].role'],
    [
      'rejects image parts',
      { model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] },
      'input[0].content[0]',
    ],
    ['rejects tools', { model: 'm', input: 'x', tools: [{ type: 'function', name: 'f' }] }, 'tools'],
    [
      'rejects previous_response_id',
      { model: 'm', input: 'x', previous_response_id: 'resp_1' },
      'previous_response_id',
    ],
  ];
  it.each(rejected)('%s with a 400 naming the param', (_name, req, param) => {
    let caught: unknown;
    try {
      responsesToChat(req);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ApiError);
    expect(caught).toMatchObject({ status: 400, code: 'invalid_request_error', param });
  });
});
