/**
 * README snippets that are copies of files under examples/: a copy that drifts from its file shows
 * readers settings the file (which `validate` checks) does not have. README "Clients, priority and
 * fair share" quotes `examples/clients.yaml`'s `gateway.clients` block.
 */

/**
 * The body of the first fenced code block (```` ``` ```` or `~~~`, any info string) that starts after
 * the first line of `markdown` containing `marker`, without its fences, each line ending in `\n`.
 * Throws when `marker` or a block after it is missing. Pure.
 */
export function fencedBlockAfter(markdown: string, marker: string): string {
  const lines = markdown.split('\n');
  const at = lines.findIndex((line) => line.includes(marker));
  if (at < 0) throw new Error(`no line contains ${JSON.stringify(marker)}`);
  const open = lines.findIndex((line, i) => i > at && /^\s*(```|~~~)/.test(line));
  if (open < 0) throw new Error(`no fenced block after ${JSON.stringify(marker)}`);
  const fence = /^\s*(```|~~~)/.exec(lines[open])?.[1] ?? '```';
  const close = lines.findIndex((line, i) => i > open && line.trim() === fence);
  if (close < 0) throw new Error(`the fenced block after ${JSON.stringify(marker)} is not closed`);
  return lines
    .slice(open + 1, close)
    .map((line) => `${line}\n`)
    .join('');
}

/**
 * The block of YAML `text` that a mapping key `key` heads at `indent` spaces: its line (`<indent>key:`)
 * and every following line up to the next non-blank line indented `indent` spaces or less (a sibling
 * key, a parent's sibling, or a comment at that depth), each line ending in `\n`. Comments on its
 * lines and deeper comment lines are part of it. Throws when no line is `<indent>key:`. Pure.
 */
export function yamlBlock(text: string, key: string, indent: number): string {
  const lines = text.split('\n');
  const head = `${' '.repeat(indent)}${key}:`;
  const start = lines.findIndex((line) => line === head || line.startsWith(`${head} `));
  if (start < 0) throw new Error(`no line starts ${JSON.stringify(head)}`);
  const depth = (line: string) => line.length - line.trimStart().length;
  const after = lines.findIndex((line, i) => i > start && line.trim() !== '' && depth(line) <= indent);
  return lines
    .slice(start, after < 0 ? lines.length : after)
    .map((line) => `${line}\n`)
    .join('');
}
