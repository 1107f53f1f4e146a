import { PASS, PLATFORM_METADATA, type AdapterFieldTables, type FieldRule } from '../request-fields';

const NO_SAMPLING = 'a CLI program takes the prompt only, no sampling or length settings';

/**
 * `cli`: a command-line program wrapped as a model (`cli-adapter.ts`). It gets the rendered prompt
 * on stdin and nothing else, so every field that would change the answer is refused (400 naming it)
 * rather than dropped; fields set to the API's own default are accepted. There is no upstream that
 * could read fields outside the OpenAI reference, so those are refused too.
 *
 * Chat:
 * | field | sent as |
 * |---|---|
 * | `messages` | the prompt on stdin |
 * | `stream`, `stream_options` | used by the gateway (chunks, usage chunk) |
 * | `user`, `metadata`, `store`, `service_tier`, `prompt_cache_key`, `safety_identifier` | not used (no effect on the answer) |
 * | `n` | refused unless `1` |
 * | `tools` | refused unless `[]`; `tool_choice` unless `"none"` or `"auto"`; `parallel_tool_calls` unless `true` |
 * | `logprobs` | refused unless `false`; `modalities` unless `["text"]`; `response_format` unless `{"type": "text"}` |
 * | every other field (`temperature`, `max_tokens`, `max_completion_tokens`, `stop`, `seed`, …) | refused (400) |
 *
 * Responses (translated to chat): `input`, `instructions`, `stream` carried; the metadata above not
 * used; `tools: []`, `tool_choice: "auto"|"none"`, `parallel_tool_calls: true`, `include: []`,
 * `truncation: "disabled"`, `background: false`, `top_logprobs: 0`, `text: {format: {type: "text"}}`
 * accepted; every other field refused (400).
 *
 * Embeddings: not served (400 naming `/v1/embeddings`).
 */
const carried: Record<string, FieldRule> = { ...PLATFORM_METADATA };

export const CLI_FIELDS: AdapterFieldTables = {
  chat: {
    fields: {
      ...carried,
      messages: PASS,
      stream: PASS,
      stream_options: PASS,
      n: { refuse: 'a CLI program gives one answer', neutral: [1] },
      tools: { refuse: 'a CLI program has no tool calling', neutral: [[]] },
      tool_choice: { refuse: 'a CLI program has no tool calling', neutral: ['none', 'auto'] },
      parallel_tool_calls: { refuse: 'a CLI program has no tool calling', neutral: [true] },
      logprobs: { refuse: 'a CLI program reports no log probabilities', neutral: [false] },
      modalities: { refuse: 'a CLI program answers text only', neutral: [['text']] },
      response_format: { refuse: 'a CLI program cannot be held to a response format', neutral: [{ type: 'text' }] },
    },
    others: { refuse: NO_SAMPLING },
  },
  responses: {
    fields: {
      ...carried,
      input: PASS,
      instructions: PASS,
      stream: PASS,
      stream_options: { ignore: 'Responses stream obfuscation; no effect on the answer' },
      tools: { refuse: 'a CLI program has no tool calling', neutral: [[]] },
      tool_choice: { refuse: 'a CLI program has no tool calling', neutral: ['none', 'auto'] },
      parallel_tool_calls: { refuse: 'a CLI program has no tool calling', neutral: [true] },
      include: { refuse: 'a CLI program has no extra output to include', neutral: [[]] },
      truncation: { refuse: 'a CLI program cannot truncate the input for you', neutral: ['disabled'] },
      background: { refuse: 'background responses need server-side state', neutral: [false] },
      top_logprobs: { refuse: 'a CLI program reports no log probabilities', neutral: [0] },
      text: { refuse: 'a CLI program cannot be held to a response format', neutral: [{ format: { type: 'text' } }] },
      previous_response_id: {
        refuse: 'a CLI program keeps no conversation state; send the whole conversation in input',
      },
    },
    others: { refuse: NO_SAMPLING },
  },
};
