import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { estimateTokenWeight } from '@iop/dispatch';
import { median } from './stats';

/**
 * Scenario `token-estimate`: the gateway's token-weight estimate (`estimateTokenWeight`,
 * README "Token-aware provider limits") against real BPE tokenizers on public text
 * (`tools/bench/samples/README.md`), and what each costs per request. Each sample is sent as one
 * user message of a Chat Completion; the real count is the chat's tokens as the OpenAI chat format
 * encodes it (`encodeChat` of gpt-tokenizer: o200k_base for gpt-4o, cl100k_base for gpt-4), message
 * framing included. The estimate leaves images and the completion out, and so does this measure.
 */

/** One sample's figures: tokens, the estimate's ratio to each tokenizer, and µs per call. */
export interface TokenEstimateSample {
  readonly name: string;
  readonly kind: string;
  readonly bytes: number;
  /** Prompt tokens as the gateway estimates them. */
  readonly estimate: number;
  /** Real tokens of the chat: o200k_base (gpt-4o), cl100k_base (gpt-4). */
  readonly o200k: number;
  readonly cl100k: number;
  /** Median µs of one estimate, and of one o200k `encodeChat`, over repeated calls. */
  readonly estimateUs: number;
  readonly tokenizerUs: number;
}

/** The scenario's result: every sample, and the one-off cost of loading the o200k vocabulary, ms. */
export interface TokenEstimateResults {
  readonly samples: TokenEstimateSample[];
  readonly vocabularyLoadMs: number;
}

type Message = { role: 'user'; content: string };
type EncodeChat = (chat: Message[]) => number[];

/** Deterministic pseudo-random bytes (a linear congruential generator), for the generated samples. */
function bytesOf(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

/** A tool list as agents send it: names, descriptions and JSON schemas. */
function toolSchemas(): string {
  const tools = ['search_documents', 'read_file', 'run_query', 'send_email', 'create_ticket'].map((name, i) => ({
    type: 'function',
    function: {
      name,
      description: `Calls ${name.replace(/_/g, ' ')} on behalf of the user; returns a JSON result or an error message.`,
      parameters: {
        type: 'object',
        properties: {
          query: { type: 'string', description: 'What to look for, in plain words.' },
          limit: { type: 'integer', minimum: 1, maximum: 100, description: 'Most results to return.' },
          scope: { type: 'string', enum: ['team', 'org', 'public'], description: `Where to look (tool ${i}).` },
        },
        required: ['query'],
      },
    },
  }));
  return JSON.stringify(tools, null, 2);
}

/** The samples: public texts, this repository's source, a tool schema, and generated digits and base64. */
function samples(root: string): { name: string; kind: string; text: string }[] {
  const file = (p: string) => readFileSync(path.join(root, p), 'utf8');
  const digits = [...bytesOf(4000, 7)].map((b) => String(b % 10)).join('');
  return [
    { name: 'gettysburg.txt', kind: 'English prose', text: file('tools/bench/samples/gettysburg.txt') },
    { name: 'gpl-3.txt', kind: 'English legal prose', text: file('tools/bench/samples/gpl-3.txt') },
    { name: 'daodejing-1-3.txt', kind: 'Chinese prose', text: file('tools/bench/samples/daodejing-1-3.txt') },
    { name: 'admit.lua', kind: 'source code (Lua)', text: file('libs/dispatch/src/queue/scripts/admit.lua') },
    {
      name: 'token-weight.ts',
      kind: 'source code (TypeScript)',
      text: file('libs/dispatch/src/route/token-weight.ts'),
    },
    { name: 'tools (JSON)', kind: 'tool schemas', text: toolSchemas() },
    { name: 'digits', kind: '4,000 random digits', text: digits },
    { name: 'base64', kind: '3,000 random bytes as base64', text: bytesOf(3000, 11).toString('base64') },
  ];
}

/** Median µs of `fn` over `reps` calls after `warm` unmeasured ones. */
function microseconds(fn: () => unknown, reps: number, warm = 3): number {
  for (let i = 0; i < warm; i++) fn();
  const times: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    fn();
    times.push((performance.now() - t0) * 1000);
  }
  return median(times);
}

/**
 * Runs the scenario in this process (no servers): loads gpt-tokenizer's o200k and cl100k models,
 * tokenizes each sample, times the estimate and the tokenizer. `root` is the workspace root.
 * @throws Error when a sample file is missing.
 */
export function runTokenEstimate(root: string, log: (line: string) => void): TokenEstimateResults {
  const t0 = performance.now();
  const o200k = (require('gpt-tokenizer/model/gpt-4o') as { encodeChat: EncodeChat }).encodeChat;
  const vocabularyLoadMs = performance.now() - t0;
  const cl100k = (require('gpt-tokenizer/model/gpt-4') as { encodeChat: EncodeChat }).encodeChat;
  const out: TokenEstimateSample[] = [];
  for (const { name, kind, text } of samples(root)) {
    const chat: Message[] = [{ role: 'user', content: text }];
    const body = { model: 'm', messages: chat };
    const estimate = estimateTokenWeight('chat', body).prompt;
    const sample: TokenEstimateSample = {
      name,
      kind,
      bytes: Buffer.byteLength(text, 'utf8'),
      estimate,
      o200k: o200k(chat).length,
      cl100k: cl100k(chat).length,
      estimateUs: microseconds(() => estimateTokenWeight('chat', body), 200),
      tokenizerUs: microseconds(() => o200k(chat), 20),
    };
    out.push(sample);
    log(
      `token-estimate: ${name}: estimate ${estimate}, o200k ${sample.o200k}, cl100k ${sample.cl100k}; ` +
        `${sample.estimateUs.toFixed(1)} µs vs ${sample.tokenizerUs.toFixed(0)} µs`,
    );
  }
  return { samples: out, vocabularyLoadMs };
}
