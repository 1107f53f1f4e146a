import { openAiOnlyChatFields, PASS, PLATFORM_METADATA, type AdapterFieldTables } from '../request-fields';

/**
 * `ollama`: Ollama's OpenAI-compatible API (`/v1/chat/completions`, `/v1/embeddings`; Ollama docs,
 * "OpenAI compatibility", supported request fields). `/v1/responses` is translated to chat
 * (`responses-translation`), so its table lists what the translation carries.
 *
 * Chat:
 * | field | sent as |
 * |---|---|
 * | `messages`, `stream`, `stream_options`, `temperature`, `top_p`, `max_tokens`, `stop`, `seed`, `frequency_penalty`, `presence_penalty`, `response_format`, `tools`, `tool_choice`, `logprobs`, `top_logprobs`, `reasoning_effort` | itself |
 * | `max_completion_tokens` | `max_tokens` (Ollama ignores `max_completion_tokens`) |
 * | `user`, `metadata`, `store`, `service_tier`, `prompt_cache_key`, `safety_identifier` | not sent (no effect on the answer) |
 * | `n` | refused unless `1` |
 * | `parallel_tool_calls` | refused unless `true` |
 * | `logit_bias` | refused unless `{}` |
 * | `modalities` | refused unless `["text"]` |
 * | `audio`, `prediction`, `web_search_options`, `verbosity`, `functions`, `function_call` | refused (400) |
 * | fields outside the OpenAI reference | themselves (Ollama's own) |
 *
 * Responses (translated to chat, then sent as above):
 * | field | sent as |
 * |---|---|
 * | `input`, `instructions` | `messages` |
 * | `max_output_tokens` | `max_tokens` |
 * | `temperature`, `top_p`, `stream` | themselves |
 * | `text.format` | `response_format` (checked, and echoed in the Response as asked: `request-echo.ts`) |
 * | `text.verbosity` | refused unless `"medium"` (by the translation: chat through Ollama has no verbosity) |
 * | `reasoning.effort` | `reasoning_effort` |
 * | `user`, `metadata`, `store`, `service_tier`, `prompt_cache_key`, `safety_identifier`, `stream_options` | not sent |
 * | `tools` | refused unless `[]` |
 * | `tool_choice` | refused unless `"auto"` or `"none"` |
 * | `parallel_tool_calls` | refused unless `true` |
 * | `include` | refused unless `[]` |
 * | `truncation` | refused unless `"disabled"` |
 * | `background` | refused unless `false` |
 * | `top_logprobs` | refused unless `0` |
 * | `previous_response_id`, `conversation`, `prompt`, `max_tool_calls` | refused (400) |
 * | fields outside the OpenAI reference | themselves, in the chat request |
 * Answers: the message's `reasoning` (Ollama's OpenAI-compatible API) becomes a `reasoning` item
 * before the message (`responses-translation`); chat answers pass through untouched.
 *
 * Embeddings:
 * | field | sent as |
 * |---|---|
 * | `input`, `dimensions` | themselves |
 * | `encoding_format` | `float` upstream; base64 encoded by the gateway when asked |
 * | `user` | not sent |
 */
export const OLLAMA_FIELDS: AdapterFieldTables = {
  chat: {
    fields: {
      ...PLATFORM_METADATA,
      messages: PASS,
      max_completion_tokens: { rename: 'max_tokens' },
      n: { refuse: 'Ollama answers one choice', neutral: [1] },
      parallel_tool_calls: { refuse: 'Ollama cannot be told to make one tool call at a time', neutral: [true] },
      logit_bias: { refuse: 'Ollama has no logit bias', neutral: [{}] },
      ...openAiOnlyChatFields('Ollama'),
    },
    others: 'pass',
  },
  responses: {
    fields: {
      ...PLATFORM_METADATA,
      input: PASS,
      instructions: PASS,
      stream: PASS,
      max_output_tokens: PASS,
      temperature: PASS,
      top_p: PASS,
      text: PASS,
      reasoning: PASS,
      stream_options: { ignore: 'Responses stream obfuscation; no effect on the answer' },
      tools: { refuse: 'this model is reached through chat completions without tool calling', neutral: [[]] },
      tool_choice: {
        refuse: 'this model is reached through chat completions without tool calling',
        neutral: ['auto', 'none'],
      },
      parallel_tool_calls: {
        refuse: 'this model is reached through chat completions without tool calling',
        neutral: [true],
      },
      include: { refuse: 'the translated answer has no extra output to include', neutral: [[]] },
      truncation: { refuse: 'the upstream cannot truncate the input for you', neutral: ['disabled'] },
      background: { refuse: 'background responses need server-side state', neutral: [false] },
      top_logprobs: { refuse: 'log probabilities are not translated', neutral: [0] },
      previous_response_id: {
        refuse: 'its upstream keeps no conversation state; send the whole conversation in input',
      },
      conversation: { refuse: 'its upstream keeps no conversation state; send the whole conversation in input' },
      prompt: { refuse: "prompt templates live on OpenAI's platform" },
      max_tool_calls: { refuse: 'this model is reached through chat completions without tool calling' },
    },
    others: 'pass',
  },
  embeddings: {
    fields: { input: PASS, dimensions: PASS, encoding_format: PASS, user: PLATFORM_METADATA.user },
    others: 'pass',
  },
};
