import { Agent, request } from 'undici';
import type { BenchTarget } from './bench-targets';
import { CHAT_BODY, streamRequest } from './scenarios';
import { probeStream } from './stream-probe';

/**
 * One non-streaming and one streaming request through every URL of the target: a target that
 * cannot answer both is skipped with the reason, not measured.
 * @throws Error saying what failed.
 */
export async function smokeTest(target: BenchTarget): Promise<void> {
  const agent = new Agent({ connections: 2 });
  try {
    for (const url of target.urls) {
      const res = await request(url, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', authorization: 'Bearer bench', ...target.headers },
        body: CHAT_BODY,
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`${url} answered ${res.statusCode}: ${text.slice(0, 200)}`);
      const parsed = JSON.parse(text) as { choices?: Array<{ message?: { content?: unknown } }> };
      if (typeof parsed.choices?.[0]?.message?.content !== 'string')
        throw new Error(`${url} answered no completion: ${text.slice(0, 200)}`);
      const stream = streamRequest(5, 0);
      const sample = await probeStream({
        url,
        headers: { ...target.headers, ...stream.headers },
        body: stream.body,
        dispatcher: agent,
      });
      if (sample.contentEvents !== 5)
        throw new Error(`${url} streamed ${sample.contentEvents} content events, the upstream sent 5`);
    }
  } finally {
    await agent.close();
  }
}
