#!/usr/bin/env node
// A tiny CLI "model" for the gateway's `type: cli` adapter: reads the whole prompt from stdin and
// answers `echo: <prompt>` on stdout in a few small chunks, so streaming is visible.
// Knobs (for tests and demos):
//   ECHO_LLM_FAIL=1        write an error to stderr and exit 3 without any output
//   ECHO_LLM_SLEEP_MS=N    wait N ms before writing anything
//   ECHO_LLM_CHUNK_MS=N    pause between chunks (default 20)
// Usage: printf 'hi' | node examples/cli/echo-llm.mjs

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const CHUNKS = 4;

let prompt = '';
process.stdin.setEncoding('utf8');
for await (const piece of process.stdin) prompt += piece;

const sleepMs = Number(process.env.ECHO_LLM_SLEEP_MS ?? 0);
if (sleepMs > 0) await sleep(sleepMs);

if (process.env.ECHO_LLM_FAIL === '1') {
  process.stderr.write('echo-llm: failing on purpose (ECHO_LLM_FAIL=1)\n');
  process.exit(3);
}

const answer = [...`echo: ${prompt}`]; // code points, so a chunk never splits a character
const size = Math.max(1, Math.ceil(answer.length / CHUNKS));
const chunkMs = Number(process.env.ECHO_LLM_CHUNK_MS ?? 20);
for (let i = 0; i < answer.length; i += size) {
  if (i > 0) await sleep(chunkMs);
  await new Promise((resolve) => process.stdout.write(answer.slice(i, i + size).join(''), resolve));
}
