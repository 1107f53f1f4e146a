import {
  ChatChunkFormat,
  chatCompletionJson,
  embeddingsJson,
  responseObject,
  ResponsesEventFormat,
} from '@iop/fake-upstream';
import type { Socket } from 'node:net';
import { writeAnswer, type Framing, type RawRequest } from './raw-upstream';

/**
 * OpenAI-shaped answers for a raw upstream (`raw-upstream.ts`), in the fake upstream's formats: what a
 * vLLM, Ollama or OpenAI-compatible server sends for chat, Responses and embeddings, streamed or not.
 * For tests only.
 */

const chatWho = { id: 'chatcmpl-raw', created: 1_700_000_000, model: 'raw', system_fingerprint: 'fp_raw' };
const responseWho = { id: 'resp_raw', messageId: 'msg_raw', created_at: 1_700_000_000, model: 'raw' };
const chatUsage = { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 };
const responsesUsage = {
  input_tokens: 1,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: 2,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: 3,
};

/** True when `req` asks for a stream. */
export const wantsStream = (req: RawRequest) => req.json.stream === true;

/** The whole events of a stream answering `req` with `pieces`: chat chunks then `data: [DONE]`, or Responses events through `response.completed`. */
export function streamEvents(req: RawRequest, pieces: readonly string[]): string[] {
  const format = req.path.endsWith('/responses')
    ? new ResponsesEventFormat(responseWho, pieces.join(''), responsesUsage)
    : new ChatChunkFormat(chatWho, undefined);
  const open = format.open();
  return [
    ...(open ? splitEvents(open) : []),
    ...pieces.map((p, i) => format.delta(p, i)),
    ...splitEvents(format.close()),
  ];
}

/** A non-streamed answer to `req` saying `text`: a chat completion, a Response, or embeddings. */
export function jsonAnswer(req: RawRequest, text: string): string {
  if (req.path.endsWith('/embeddings')) return embeddingsJson(req.json, 'raw');
  if (req.path.endsWith('/responses')) return JSON.stringify(responseObject(responseWho, text, responsesUsage));
  return chatCompletionJson(chatWho, text, chatUsage);
}

/**
 * Answers `req` whole on `socket`, as its endpoint and `stream` flag ask, with the text `hello
 * world`: `framing` delimits the body; `encode` (with its `Content-Encoding` name) compresses it.
 */
export function answerWhole(
  req: RawRequest,
  socket: Socket,
  opts: { framing?: Framing; encode?: { name: string; apply(bytes: Buffer): Buffer } } = {},
): void {
  const stream = wantsStream(req) && !req.path.endsWith('/embeddings');
  const text = stream ? streamEvents(req, ['hello', ' world']).join('') : jsonAnswer(req, 'hello world');
  const headers: Record<string, string> = {
    'content-type': stream ? 'text/event-stream; charset=utf-8' : 'application/json',
  };
  let body: Buffer = Buffer.from(text);
  if (opts.encode) {
    headers['content-encoding'] = opts.encode.name;
    body = opts.encode.apply(body);
  }
  writeAnswer(socket, 200, headers, body, opts.framing ?? 'content-length');
}

/** `text` cut into its whole events, each with its blank line. */
export function splitEvents(text: string): string[] {
  return text.split(/(?<=\n\n)/).filter((e) => e.trim() !== '');
}
