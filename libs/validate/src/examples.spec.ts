import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfigText } from './load-config';

const example = (name: string) => readFileSync(join(__dirname, '..', '..', '..', 'examples', name), 'utf8');

describe('examples/', () => {
  it('clients.yaml is a valid config with four clients once their keys are set', () => {
    const env = {
      CHAT_UI_KEY: 'k-chat',
      ANALYTICS_KEY: 'k-analytics',
      RESEARCH_KEY: 'k-research',
      BATCH_KEY: 'k-batch',
    };
    const loaded = parseConfigText(example('clients.yaml'), env, 'clients.yaml');
    expect(
      loaded.ok ? loaded.config.gateway.clients.map((c) => [c.id, c.priority, c.weight]) : loaded.problems,
    ).toEqual([
      ['chat-ui', 10, 1],
      ['analytics', 0, 3],
      ['research', 0, 1],
      ['nightly-batch', -1, 1],
    ]);
  });
});
