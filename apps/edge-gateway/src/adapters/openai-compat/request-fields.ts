import { openAiOnlyChatFields, PASS_ALL, type AdapterFieldTables } from '../request-fields';

/**
 * `openai_compat`: a server that implements the OpenAI API itself. Every field of
 * `/v1/chat/completions`, `/v1/responses` and `/v1/embeddings` is passed on as the client sent it
 * (the model renamed to the catalog's `upstream`); what the server does not support it answers
 * with its own 4xx, which reaches the client.
 *
 * | field | sent as |
 * |---|---|
 * | every field | itself |
 */
export const OPENAI_COMPAT_FIELDS: AdapterFieldTables = { chat: PASS_ALL, responses: PASS_ALL, embeddings: PASS_ALL };

/**
 * `vllm`: vLLM's OpenAI-compatible server (`vllm serve`). It takes the chat fields of the OpenAI
 * reference, `max_completion_tokens` included, plus its own extensions (`top_k`, `guided_json`, …,
 * passed on); its `/v1/responses` and `/v1/embeddings` (`encoding_format` float or base64,
 * `dimensions`) are passed through. Refused on chat, because vLLM has nothing to do them with:
 *
 * | field | sent as |
 * |---|---|
 * | `audio`, `prediction`, `web_search_options`, `verbosity`, `functions`, `function_call` | refused (400) |
 * | `modalities` | refused unless `["text"]` (then not sent) |
 * | any other field | itself |
 */
export const VLLM_FIELDS: AdapterFieldTables = {
  chat: {
    fields: openAiOnlyChatFields('vLLM'),
    others: 'pass',
  },
  responses: PASS_ALL,
  embeddings: PASS_ALL,
};
