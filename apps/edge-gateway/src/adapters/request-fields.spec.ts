import { CLI_FIELDS } from './cli/request-fields';
import { OLLAMA_FIELDS } from './ollama/request-fields';
import { OPENAI_COMPAT_FIELDS, VLLM_FIELDS } from './openai-compat/request-fields';
import { applyFieldTable, type FieldTable } from './request-fields';

const apply = (table: FieldTable | undefined, body: Record<string, unknown>) =>
  applyFieldTable(table!, { model: 'm', ...body }, 'the adapter', 'chat');
const refusal = (table: FieldTable | undefined, body: Record<string, unknown>) => {
  try {
    apply(table, body);
  } catch (err) {
    return err as { status: number; param: string; message: string };
  }
  throw new Error('not refused');
};

describe('request field tables (README "Request fields per adapter")', () => {
  it('passes every field to an OpenAI-compatible server, the same object untouched', () => {
    const body = { model: 'm', messages: [], max_completion_tokens: 5, logit_bias: { 1: 2 }, anything: 1 };
    expect(applyFieldTable(OPENAI_COMPAT_FIELDS.chat!, body, 'x', 'chat')).toBe(body);
  });

  it('sends max_completion_tokens to Ollama as max_tokens, and drops metadata with no effect on the answer', () => {
    expect(
      apply(OLLAMA_FIELDS.chat, {
        messages: [],
        max_completion_tokens: 16,
        user: 'u',
        store: true,
        temperature: 0.2,
        options: { num_ctx: 4 },
      }),
    ).toEqual({
      model: 'm',
      messages: [],
      max_tokens: 16,
      temperature: 0.2,
      options: { num_ctx: 4 },
    });
  });

  it('refuses max_tokens and max_completion_tokens that disagree, and accepts them when they agree', () => {
    expect(refusal(OLLAMA_FIELDS.chat, { max_completion_tokens: 16, max_tokens: 32 })).toMatchObject({
      status: 400,
      param: 'max_completion_tokens',
    });
    expect(apply(OLLAMA_FIELDS.chat, { max_completion_tokens: 16, max_tokens: 16 })).toEqual({
      model: 'm',
      max_tokens: 16,
    });
  });

  it.each([
    [OLLAMA_FIELDS, { n: 2 }, 'n'],
    [OLLAMA_FIELDS, { logit_bias: { 50256: -100 } }, 'logit_bias'],
    [OLLAMA_FIELDS, { audio: { voice: 'x' } }, 'audio'],
    [VLLM_FIELDS, { prediction: { type: 'content', content: 'x' } }, 'prediction'],
    [CLI_FIELDS, { temperature: 0.5 }, 'temperature'],
    [CLI_FIELDS, { max_completion_tokens: 5 }, 'max_completion_tokens'],
    [CLI_FIELDS, { tools: [{ type: 'function', function: { name: 'f' } }] }, 'tools'],
    [CLI_FIELDS, { my_extension: 1 }, 'my_extension'],
  ])('refuses what an adapter cannot carry with a 400 naming the field (%#)', (tables, body, param) => {
    const err = refusal(tables.chat, body);
    expect(err).toMatchObject({ status: 400, param });
    expect(err.message).toContain(param);
  });

  it("accepts the API's own defaults and empty or null values where it refuses the field, and sends nothing for them", () => {
    expect(
      apply(CLI_FIELDS.chat, {
        messages: [],
        n: 1,
        tools: [],
        tool_choice: 'none',
        temperature: null,
        fake: {},
        stream: true,
      }),
    ).toEqual({
      model: 'm',
      messages: [],
      stream: true,
    });
    expect(apply(OLLAMA_FIELDS.chat, { n: 1, parallel_tool_calls: true, modalities: ['text'] })).toEqual({
      model: 'm',
    });
  });

  it('has no embeddings table for CLI (the endpoint is not served) and one for every HTTP adapter', () => {
    expect(CLI_FIELDS.embeddings).toBeUndefined();
    for (const tables of [OPENAI_COMPAT_FIELDS, VLLM_FIELDS, OLLAMA_FIELDS]) expect(tables.embeddings).toBeDefined();
  });

  it('checks a Responses request against what the translation to chat carries', () => {
    const responses = (tables: typeof OLLAMA_FIELDS, body: Record<string, unknown>) =>
      applyFieldTable(tables.responses!, { model: 'm', input: 'x', ...body }, 'x', 'responses');
    expect(responses(OLLAMA_FIELDS, { max_output_tokens: 8, store: false, tools: [] })).toEqual({
      model: 'm',
      input: 'x',
      max_output_tokens: 8,
    });
    expect(() => responses(OLLAMA_FIELDS, { tools: [{ type: 'web_search' }] })).toThrow(
      expect.objectContaining({ param: 'tools' }),
    );
    expect(() => responses(CLI_FIELDS, { max_output_tokens: 8 })).toThrow(
      expect.objectContaining({ param: 'max_output_tokens' }),
    );
  });
});
