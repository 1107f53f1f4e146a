import { freePort, startRedis, uniquePrefix, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { parsePrometheusText } from '@iop/status/testing';
import { parser } from '@prometheus-io/lezer-promql';
import type { SyntaxNode } from '@lezer/common';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ManagedProcess } from '../managed-process';
import { WORKSPACE_ROOT } from '../local-fleet';

const DASHBOARD = path.join(WORKSPACE_ROOT, 'deploy/grafana/iop-edge.json');

interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: { refId: string; expr: string; datasource?: { uid: string } }[];
}
const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; type: string }[] };
};
const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

/** Grafana's own variables, as Prometheus would see them after substitution. */
const substitute = (expr: string) => expr.replace(/\$__(rate_interval|interval|range)/g, '5m');

/** What one query reads: metric names, label names it matches on, and for each aggregation its grouping labels and metrics. */
interface QueryUse {
  errors: string[];
  selectors: { metric: string; matchers: string[] }[];
  groupings: { labels: string[]; metrics: string[] }[];
}

function analyse(expr: string): QueryUse {
  const text = substitute(expr);
  const use: QueryUse = { errors: [], selectors: [], groupings: [] };
  const slice = (n: SyntaxNode) => text.slice(n.from, n.to);
  const children = (n: SyntaxNode) => {
    const out: SyntaxNode[] = [];
    for (let c = n.firstChild; c; c = c.nextSibling) out.push(c);
    return out;
  };
  const selectorsIn = (n: SyntaxNode): string[] =>
    n.name === 'VectorSelector' ? [slice(n.getChild('Identifier')!)] : children(n).flatMap(selectorsIn);
  const walk = (n: SyntaxNode) => {
    if (n.type.isError)
      use.errors.push(`syntax error at ${n.from}: ${JSON.stringify(text.slice(n.from, n.from + 20))}`);
    if (n.name === 'VectorSelector') {
      const id = n.getChild('Identifier');
      const matchers = n.getChild('LabelMatchers');
      use.selectors.push({
        metric: id ? slice(id) : '',
        matchers: matchers
          ? children(matchers)
              .map((m) => m.getChild('LabelName'))
              .filter((l): l is SyntaxNode => !!l)
              .map(slice)
          : [],
      });
    }
    if (n.name === 'AggregateExpr') {
      const grouping = n.getChild('AggregateModifier')?.getChild('GroupingLabels');
      if (grouping)
        use.groupings.push({ labels: grouping.getChildren('LabelName').map(slice), metrics: selectorsIn(n) });
    }
    children(n).forEach(walk);
  };
  walk(parser.parse(text).topNode);
  return use;
}

describe('Grafana dashboard (deploy/grafana/iop-edge.json)', () => {
  it('is a dashboard of distinct panels, every query on the templated Prometheus datasource', () => {
    expect(dashboard.uid).toBe('iop-edge');
    expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
    expect(dashboard.templating.list).toContainEqual(
      expect.objectContaining({ name: 'datasource', type: 'datasource' }),
    );
    expect(queries.length).toBeGreaterThan(10);
    for (const p of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect({ panel: p.title, datasource: p.datasource?.uid, targets: (p.targets?.length ?? 0) > 0 }).toEqual({
        panel: p.title,
        datasource: '${datasource}',
        targets: true,
      });
    }
  });

  it('every query is valid PromQL', () => {
    for (const q of queries) expect({ ...q, errors: analyse(q.expr).errors }).toEqual({ ...q, errors: [] });
  });

  /** The gateway and the exporter from dist/, after one pooled request: every family has samples, so its labels are known. */
  describe('against what the gateway and the exporter export', () => {
    let redis: TestRedis;
    let dir: string;
    const processes: ManagedProcess[] = [];
    let upstream: FakeUpstream | undefined;
    /** Metric name (histograms: _bucket, _sum, _count) → label names seen. */
    const exported = new Map<string, Set<string>>();

    beforeAll(async () => {
      redis = await startRedis();
      dir = mkdtempSync(path.join(tmpdir(), 'iop-dashboard-'));
      const [upstreamPort, gatewayPort, exporterPort] = [await freePort(), await freePort(), await freePort()];
      const config = path.join(dir, 'edge.yaml');
      writeFileSync(
        config,
        [
          'version: 1',
          // A client with a token budget, so the budget gauges and the client token counter have series.
          'gateway: { clients: [{ id: research, keys: [k-research], tokens_per_minute: 100000, tokens_per_day: 1000000 }] }',
          `queue: { backend: redis, prefix: "${uniquePrefix('dashboard')}" }`,
          'nodes:',
          '  - id: node-1',
          `    adapters: [{ id: gpu, type: vllm, base_url: "http://127.0.0.1:${upstreamPort}/v1" }]`,
          '    providers: [{ id: gpu-1, category: vllm, adapter: gpu, models: [m1], max_concurrency: 2 }]',
        ].join('\n'),
      );
      const env = { REDIS_URL: redis.url, LOG_LEVEL: 'warn' };
      const start = async (name: string, args: string[]) => {
        const proc = new ManagedProcess({
          name,
          command: process.execPath,
          args: [path.join(WORKSPACE_ROOT, 'dist/apps', name, 'main.js'), ...args],
          env,
          ready: /listening on/,
        });
        processes.push(proc);
        await proc.start();
      };
      upstream = await startFakeUpstream({ host: '127.0.0.1', port: upstreamPort, name: 'demo' });
      await start('edge-gateway', ['--config', config, '--listen', `127.0.0.1:${gatewayPort}`]);
      await start('status-exporter', ['--config', config, '--listen', `127.0.0.1:${exporterPort}`]);
      const res = await fetch(`http://127.0.0.1:${gatewayPort}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer k-research' },
        body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'fill every series' }] }),
      });
      expect(res.status).toBe(200);
      await res.text();
      for (const port of [gatewayPort, exporterPort]) {
        for (const s of parsePrometheusText(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text())) {
          const labels = exported.get(s.name) ?? new Set<string>();
          for (const l of Object.keys(s.labels)) labels.add(l);
          exported.set(s.name, labels);
        }
      }
    }, 60_000);
    afterAll(async () => {
      for (const p of processes) await p.stop('SIGTERM');
      await upstream?.close();
      await redis?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('every query names metrics the gateway or the exporter exports, with labels they carry', () => {
      // Prometheus adds these at scrape time.
      const scrapeLabels = ['instance', 'job'];
      for (const q of queries) {
        const use = analyse(q.expr);
        expect(use.selectors.length).toBeGreaterThan(0);
        for (const s of use.selectors) {
          expect({ ...q, metric: s.metric, exported: exported.has(s.metric) }).toEqual({
            ...q,
            metric: s.metric,
            exported: true,
          });
          const missing = s.matchers.filter((l) => !exported.get(s.metric)!.has(l));
          expect({ ...q, metric: s.metric, missing }).toEqual({ ...q, metric: s.metric, missing: [] });
        }
        for (const g of use.groupings) {
          const known = new Set([...scrapeLabels, ...g.metrics.flatMap((m) => [...(exported.get(m) ?? [])])]);
          expect({ ...q, missing: g.labels.filter((l) => !known.has(l)) }).toEqual({ ...q, missing: [] });
        }
      }
    });

    it("charts the token counters, the per-provider histograms, the fleet-wide counts and the clients' token budgets", () => {
      const used = new Set(queries.flatMap((q) => analyse(q.expr).selectors.map((s) => s.metric)));
      for (const metric of [
        'iop_edge_tokens_total',
        'gen_ai_client_token_usage_bucket',
        'iop_edge_provider_queue_wait_seconds_bucket',
        'iop_edge_provider_time_to_first_byte_seconds_bucket',
        'gen_ai_client_operation_duration_seconds_bucket',
        'iop_edge_resource_in_flight',
        'iop_edge_resource_max_concurrency',
        'iop_edge_resource_queued',
        'iop_edge_client_tokens_total',
        'iop_edge_client_tokens_limit',
        'iop_edge_client_tokens_used',
        'iop_edge_client_tokens_reserved',
        'iop_edge_client_tokens_remaining',
      ]) {
        expect(used).toContain(metric);
      }
    });
  });
});
