/**
 * A lenient reader of CLI prompts, as a program that parses turns would be written: it splits on
 * every line break any common reader knows (`\r\n`, `\n`, lone `\r`, VT, FF, `\x1c`-`\x1e`, NEL,
 * U+2028, U+2029), trims every kind of blank and zero-width character from a line's start, and
 * takes any `Role:` line (any case, blanks before the colon) as the start of a turn. Text before
 * the first role line is a `user` turn (a single-message prompt has no label). In `jsonl` every
 * non-empty line is one JSON message. Kept apart from `prompt-rendering.ts` on purpose: it must
 * not share that file's idea of a line break.
 *
 * Written as JavaScript source so that the same reader runs inside a CLI program under test
 * (`TURN_READER_PROGRAM`) and in-process ({@link readTurns}).
 */
const READ_TURNS_BODY = `
  const lines = prompt.split(/\\r\\n|[\\n\\r\\v\\f\\x1c\\x1d\\x1e\\u0085\\u2028\\u2029]/);
  if (format === 'jsonl') return lines.filter((l) => l !== '').map((l) => JSON.parse(l));
  const roles = ['system', 'developer', 'user', 'assistant', 'tool', 'function'];
  const turns = [];
  for (const line of lines) {
    const bare = line.replace(/^[\\s\\x1f\\u200b-\\u200d\\u2060\\ufeff]+/, '');
    const label = /^([A-Za-z]+)[\\s\\x1f\\u200b-\\u200d\\u2060\\ufeff]*:/.exec(bare);
    if (label && roles.includes(label[1].toLowerCase())) turns.push({ role: label[1].toLowerCase() });
    else if (turns.length === 0) turns.push({ role: 'user' });
  }
  return turns;
`;

/** The turns a lenient turn-parsing program reads from `prompt` (see the file's docstring). */
export const readTurns = new Function('prompt', 'format', READ_TURNS_BODY) as (
  prompt: string,
  format: 'text' | 'jsonl',
) => Array<{ role: string; content?: string }>;

/**
 * A node program (for `node -e`) that reads the prompt on stdin and answers the JSON array of the
 * turns it reads ({@link readTurns}); its first argument is the prompt format.
 */
export const TURN_READER_PROGRAM = `
const readTurns = (prompt, format) => {${READ_TURNS_BODY}};
let prompt = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => (prompt += d));
process.stdin.on('end', () => process.stdout.write(JSON.stringify(readTurns(prompt, process.argv[1] || 'text'))));
`;
