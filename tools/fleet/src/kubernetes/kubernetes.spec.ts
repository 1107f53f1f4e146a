import { freePort, startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { RESOURCE_METRICS } from '@iop/status';
import { GATEWAY_ONLY_SECRETS, parseConfigText } from '@iop/validate';
import { parser } from '@prometheus-io/lezer-promql';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ManagedProcess } from '../managed-process';
import { WORKSPACE_ROOT } from '../local-fleet';
import { writeLikeKubelet } from './kubelet-volume';
import { loadKustomization, one, schemaProblems, type K8sObject, type Kustomization } from './manifests';

const KUBE = path.join(WORKSPACE_ROOT, 'deploy/kubernetes');
const base = loadKustomization(path.join(KUBE, 'base'));
const overlays = readdirSync(path.join(KUBE, 'overlays')).map((name) =>
  loadKustomization(path.join(KUBE, 'overlays', name)),
);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Container = Record<string, any>;
const podSpec = (k: Kustomization) => one(k, 'Deployment').spec.template.spec;
const container = (k: Kustomization, name: string): Container =>
  podSpec(k).containers.find((c: Container) => c.name === name);
const portOf = (c: Container, name: string): number =>
  c.ports.find((p: { name: string }) => p.name === name)?.containerPort;
/** The port a container listens on, from its `--listen host:port` argument. */
const listenPort = (c: Container) => Number(c.args[c.args.indexOf('--listen') + 1].split(':').pop());
const env = (c: Container, name: string) => c.env?.find((e: { name: string }) => e.name === name)?.value;
const matches = (selector: Record<string, string>, labels: Record<string, string> | undefined) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);
/** The Secret keys a container reads one by one (`env[].valueFrom.secretKeyRef`), by variable name. */
const secretRefs = (c: Container): Record<string, string> =>
  Object.fromEntries(
    (c.env ?? [])
      .filter((e: Container) => e.valueFrom?.secretKeyRef)
      .map((e: Container) => [e.name, `${e.valueFrom.secretKeyRef.name}/${e.valueFrom.secretKeyRef.key}`]),
  );
/** `${VAR}`s of an edge.yaml. */
const variables = (text: string) => [
  ...new Set([...text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1])),
];

describe('Kubernetes manifests (deploy/kubernetes)', () => {
  it.each([base, ...overlays].map((k) => [path.relative(WORKSPACE_ROOT, k.dir), k] as const))(
    '%s: every file the kustomization names exists and every object is valid against its Kubernetes schema',
    (_dir, k) => {
      expect(k.problems).toEqual([]);
      const objects = [
        ...k.objects.map((o) => ({ where: path.relative(WORKSPACE_ROOT, o.file), object: o.object })),
        ...k.generated.map((object) => ({ where: 'generated', object })),
      ];
      expect(objects.length).toBeGreaterThan(0);
      for (const { where, object } of objects)
        expect({ where, kind: object.kind, name: object.metadata?.name, problems: schemaProblems(object) }).toEqual({
          where,
          kind: object.kind,
          name: object.metadata?.name,
          problems: [],
        });
    },
  );

  it('a gateway Deployment with the status exporter as a sidecar, both from the one image; no replicas, the autoscaler owns the count', () => {
    const deployment = one(base, 'Deployment');
    // A `replicas` here would reset the autoscaler's count on every `kubectl apply -k`.
    expect(deployment.spec).not.toHaveProperty('replicas');
    expect(podSpec(base).containers.map((c: Container) => c.name)).toEqual(['gateway', 'status-exporter']);
    for (const c of podSpec(base).containers) expect(c.image).toBe('iop-edge');
    // The image's entrypoints (Dockerfile: PATH=/app/bin, deploy/docker/bin).
    expect(container(base, 'gateway').args[0]).toBe('edge-gateway');
    expect(container(base, 'status-exporter').args[0]).toBe('status-exporter');
    for (const c of podSpec(base).containers)
      expect(existsSync(path.join(WORKSPACE_ROOT, 'deploy/docker/bin', c.args[0]))).toBe(true);
    expect(deployment.spec.strategy.rollingUpdate).toEqual({ maxUnavailable: 0, maxSurge: 1 });
  });

  it('probes name the ports each process listens on and the paths it serves: /readyz and /healthz for the gateway, /healthz for the exporter', () => {
    const gateway = container(base, 'gateway');
    expect(portOf(gateway, 'http')).toBe(listenPort(gateway));
    expect(gateway.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(gateway.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(gateway.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    const exporter = container(base, 'status-exporter');
    expect(portOf(exporter, 'status')).toBe(listenPort(exporter));
    expect(exporter.readinessProbe.httpGet).toEqual({ path: '/healthz', port: 'status' });
    expect(exporter.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'status' });
  });

  it('terminationGracePeriodSeconds covers the preStop sleep plus the SIGTERM drain (IOP_SHUTDOWN_GRACE_MS) plus time to close', () => {
    const gateway = container(base, 'gateway');
    const preStop = gateway.lifecycle.preStop.exec.command as string[];
    expect(preStop[0]).toBe('sleep');
    const sleepS = Number(preStop[1]);
    // The pod must stay in the endpoints' eyes until the readiness probe could have failed at least once.
    expect(sleepS).toBeGreaterThanOrEqual(gateway.readinessProbe.periodSeconds);
    const drainS = Number(env(gateway, 'IOP_SHUTDOWN_GRACE_MS')) / 1000;
    expect(drainS).toBeGreaterThan(0);
    expect(podSpec(base).terminationGracePeriodSeconds).toBeGreaterThanOrEqual(sleepS + drainS + 5);
  });

  it('edge.yaml comes from the ConfigMap mounted as a directory (no subPath, no name hash), so kubelet updates reach the running gateways', () => {
    const gateway = container(base, 'gateway');
    const configFile = gateway.args[gateway.args.indexOf('--config') + 1] as string;
    const volume = podSpec(base).volumes.find((v: Container) => v.configMap?.name === 'iop-edge-config');
    for (const c of podSpec(base).containers) {
      expect(c.args[c.args.indexOf('--config') + 1]).toBe(configFile);
      const mount = c.volumeMounts.find((m: Container) => m.name === volume.name);
      expect(mount).toEqual({ name: volume.name, mountPath: path.posix.dirname(configFile), readOnly: true });
    }
    const configMap = one(base, 'ConfigMap', 'iop-edge-config');
    expect(Object.keys(configMap.data)).toEqual([path.posix.basename(configFile)]);
    expect(base.generators.get('iop-edge-config')?.options?.disableNameSuffixHash).toBe(true);
    for (const overlay of overlays)
      expect(overlay.generators.get('iop-edge-config')?.options?.disableNameSuffixHash ?? true).toBe(true);
  });

  it('the gateway reads the Secret iop-edge-secrets whole; the exporter sidecar only REDIS_URL and STATUS_KEY, no upstream or client key', () => {
    const gateway = container(base, 'gateway');
    expect(gateway.envFrom).toEqual([{ secretRef: { name: 'iop-edge-secrets' } }]);
    const exporter = container(base, 'status-exporter');
    expect(exporter.envFrom).toBeUndefined();
    expect(secretRefs(exporter)).toEqual({
      REDIS_URL: 'iop-edge-secrets/REDIS_URL',
      STATUS_KEY: 'iop-edge-secrets/STATUS_KEY',
    });
  });

  it("each edge.yaml is valid for the gateway with the whole Secret, and for the exporter with REDIS_URL and STATUS_KEY only; each overlay's Secret has every ${VAR}", () => {
    for (const k of [base, ...overlays]) {
      const text = one(k, 'ConfigMap', 'iop-edge-config').data['edge.yaml'] as string;
      const secret = k.generated.find((o) => o.kind === 'Secret' && o.metadata.name === 'iop-edge-secrets');
      const provided: Record<string, string> =
        secret?.stringData ??
        Object.fromEntries(['REDIS_URL', 'STATUS_KEY', ...variables(text)].map((v) => [v, `value-of-${v}`]));
      if (secret)
        expect(Object.keys(provided)).toEqual(expect.arrayContaining(['REDIS_URL', 'STATUS_KEY', ...variables(text)]));
      const redisUrl = provided['REDIS_URL'].startsWith('redis') ? provided['REDIS_URL'] : 'redis://redis:6379';
      const gateway = parseConfigText(text, { ...provided, REDIS_URL: redisUrl }, `${k.dir}/edge.yaml`);
      expect(gateway.ok ? [] : gateway.problems).toEqual([]);
      // The status key protects /status and /metrics of both containers.
      expect(gateway.ok && gateway.config.status.api_keys).toEqual([provided['STATUS_KEY']]);
      const exporterEnv = { REDIS_URL: redisUrl, STATUS_KEY: provided['STATUS_KEY'] };
      const exporter = parseConfigText(text, exporterEnv, `${k.dir}/edge.yaml`, {
        unsetAllowedAt: GATEWAY_ONLY_SECRETS,
      });
      expect(exporter.ok ? [] : exporter.problems).toEqual([]);
    }
  });

  it('Service, PodDisruptionBudget, ScaledObject and ServiceMonitor select the gateway pods and name its ports; Prometheus scrapes with the status key', () => {
    const labels = one(base, 'Deployment').spec.template.metadata.labels;
    const service = one(base, 'Service');
    expect(matches(service.spec.selector, labels)).toBe(true);
    const containerPorts = podSpec(base).containers.flatMap((c: Container) =>
      c.ports.map((p: { name: string }) => p.name),
    );
    expect(service.spec.ports.map((p: { targetPort: string }) => p.targetPort).sort()).toEqual(containerPorts.sort());
    expect(matches(one(base, 'PodDisruptionBudget').spec.selector.matchLabels, labels)).toBe(true);
    expect(one(base, 'PodDisruptionBudget').spec.maxUnavailable).toBe(1);
    expect(one(base, 'ScaledObject').spec.scaleTargetRef).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: one(base, 'Deployment').metadata.name,
    });
    const monitor = one(base, 'ServiceMonitor');
    expect(matches(monitor.spec.selector.matchLabels, service.metadata.labels)).toBe(true);
    expect(monitor.spec.endpoints.map((e: { port: string; path: string }) => `${e.port} ${e.path}`)).toEqual(
      service.spec.ports.map((p: { name: string }) => `${p.name} /metrics`),
    );
    for (const e of monitor.spec.endpoints)
      expect(e.authorization).toEqual({ type: 'Bearer', credentials: { name: 'iop-edge-secrets', key: 'STATUS_KEY' } });
  });

  it("scales with KEDA on the gateways' CPU and on the fleet's exact queued count from the exporter, with no HPA of its own and no replicas to fight", () => {
    const scaled = one(base, 'ScaledObject');
    expect(base.objects.filter((o) => o.object.kind === 'HorizontalPodAutoscaler')).toEqual([]);
    expect(scaled.spec).toMatchObject({ minReplicaCount: 3, maxReplicaCount: 10 });
    expect(scaled.spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.policies).toEqual([
      { type: 'Pods', value: 1, periodSeconds: 60 },
    ]);
    const triggers = scaled.spec.triggers as Container[];
    expect(triggers.map((t) => t.type)).toEqual(['cpu', 'prometheus']);
    expect(triggers[0]).toMatchObject({ metricType: 'Utilization', metadata: { containerName: 'gateway' } });
    // KEDA's cpu trigger needs a CPU request on the container it measures.
    expect(container(base, 'gateway').resources.requests.cpu).toBeTruthy();
    const { query, threshold } = triggers[1].metadata as { query: string; threshold: string };
    expect(Number(threshold)).toBeGreaterThan(0);
    // Valid PromQL (the Prometheus project's grammar) on the exporter's series of this Service's job.
    const tree = parser.parse(query);
    const errors: number[] = [];
    const selectors: string[] = [];
    tree.iterate({
      enter: (n) => {
        if (n.type.isError) errors.push(n.from);
        if (n.name === 'VectorSelector') selectors.push(query.slice(n.from, n.to));
      },
    });
    expect(errors).toEqual([]);
    const service = one(base, 'Service').metadata.name;
    expect(selectors).toEqual([
      `${RESOURCE_METRICS.queued}{job="${service}", container="${container(base, 'status-exporter').name}"}`,
    ]);
    // Every pod's exporter reports the same fleet-wide numbers: one per resource, then the sum.
    expect(query).toMatch(/^sum\(max by \(resource\) \(/);
  });

  it('the example overlay: a namespace, the image the README builds, and a single-node Redis with AOF that REDIS_URL points at', () => {
    const overlay = overlays.find((k) => k.dir.endsWith('example'))!;
    expect(overlay.file['namespace']).toBe('iop-edge');
    expect(one(overlay, 'Namespace').metadata.name).toBe('iop-edge');
    for (const o of overlay.objects.map((x) => x.object).filter((o) => o.kind !== 'Namespace'))
      expect(o.metadata.namespace).toBe('iop-edge');
    // No public image exists: the README's Kubernetes section starts by building this one.
    const image = overlay.images.get('iop-edge') ?? '';
    expect(image).toMatch(/^iop-edge:\d+\.\d+\.\d+$/);
    const readme = readFileSync(path.join(WORKSPACE_ROOT, 'README.md'), 'utf8');
    const section = readme.split(/^### Kubernetes$/m)[1]?.split(/^#{2,3} /m)[0] ?? '';
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
    const commands = firstBlock
      .split('\n')
      .map((l) => l.replace(/#.*$/, '').trim())
      .filter(Boolean);
    expect(commands[0]).toBe(`docker build -t ${image} .`);
    expect(existsSync(path.join(WORKSPACE_ROOT, 'Dockerfile'))).toBe(true);
    expect(commands).toContain(`kubectl apply -k ${path.relative(WORKSPACE_ROOT, overlay.dir)}`);
    const redis = one(overlay, 'StatefulSet');
    const redisArgs = (redis.spec.template.spec.containers[0].args as string[]).join(' ');
    expect(redisArgs).toContain('--appendonly yes');
    expect(redisArgs).toContain('--timeout 0');
    const redisService = overlay.objects
      .map((x) => x.object)
      .find((o) => o.kind === 'Service' && matches(o.spec.selector, redis.spec.template.metadata.labels)) as K8sObject;
    expect(redis.spec.serviceName).toBe(redisService.metadata.name);
    const url = new URL(one(overlay, 'Secret', 'iop-edge-secrets').stringData['REDIS_URL']);
    expect(`${url.hostname}:${url.port}`).toBe(`${redisService.metadata.name}:${redisService.spec.ports[0].port}`);
  });
});

/**
 * The pod's two processes from the built dist/, started with the manifest's own arguments (the
 * config path and the listen port retargeted to this test), on a config directory written the
 * way kubelet writes a ConfigMap volume: the probes and the ServiceMonitor paths answer on the
 * ports the manifest names, and a ConfigMap update reaches both processes without a restart.
 */
describe('the pod of deploy/kubernetes/base, run from dist/', () => {
  let redis: TestRedis;
  let dir: string;
  const processes: ManagedProcess[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(path.join(tmpdir(), 'iop-k8s-'));
  });
  afterAll(async () => {
    for (const p of processes) await p.stop('SIGTERM');
    for (const p of processes) p.closeLog();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const edgeYaml = (prefix: string, models: string[]) =>
    [
      'version: 1',
      'gateway: { api_keys: ["${EDGE_API_KEY}"] }',
      `queue: { backend: redis, prefix: "${prefix}" }`,
      'status: { api_keys: ["${STATUS_KEY}"] }',
      'nodes:',
      '  - id: node-1',
      '    adapters: [{ id: vllm, type: vllm, base_url: "http://127.0.0.1:9/v1", api_key: "${VLLM_API_KEY}" }]',
      '    providers:',
      ...models.map((m) => `      - { id: ${m}-p, category: vllm, adapter: vllm, models: [${m}], max_concurrency: 4 }`),
    ].join('\n');

  it('answers the probes and /metrics on the named ports, each container given only its own env, and reloads a ConfigMap update made the kubelet way', async () => {
    // The Secret as the pod would see it; each container gets what its manifest names, nothing more.
    const secret: Record<string, string> = {
      REDIS_URL: redis.url,
      EDGE_API_KEY: 'k',
      VLLM_API_KEY: 'v',
      STATUS_KEY: 's',
    };
    const envOf = (c: Container): Record<string, string> => ({
      ...(c.envFrom?.some((f: Container) => f.secretRef?.name === 'iop-edge-secrets') ? secret : {}),
      ...Object.fromEntries(
        (c.env ?? []).map((e: Container) => [e.name, e.valueFrom ? secret[e.valueFrom.secretKeyRef.key] : e.value]),
      ),
    });
    expect(Object.keys(envOf(container(base, 'status-exporter'))).sort()).toEqual([
      'LOG_LEVEL',
      'REDIS_URL',
      'STATUS_KEY',
    ]);
    const volume = path.join(dir, 'etc-iop-edge');
    const prefix = uniquePrefix('k8s');
    writeLikeKubelet(volume, { 'edge.yaml': edgeYaml(prefix, ['m1']) });
    expect(lstatSync(path.join(volume, 'edge.yaml')).isSymbolicLink()).toBe(true);

    const started = new Map<string, { url: string; container: Container }>();
    for (const c of podSpec(base).containers as Container[]) {
      const port = await freePort();
      const argv = (c.args as string[]).map((a) =>
        a === '/etc/iop-edge/edge.yaml'
          ? path.join(volume, 'edge.yaml')
          : a.replace(/^0\.0\.0\.0:\d+$/, `127.0.0.1:${port}`),
      );
      const main = path.join(WORKSPACE_ROOT, 'dist/apps', argv[0], 'main.js');
      const proc = new ManagedProcess({
        name: c.name,
        command: process.execPath,
        args: [main, ...argv.slice(1)],
        // Nothing of this test's own environment beyond PATH: no key leaks in from outside the manifest.
        env: {
          ...Object.fromEntries(Object.keys(process.env).map((name) => [name, undefined])),
          PATH: process.env['PATH'],
          ...envOf(c),
          LOG_LEVEL: 'warn',
        },
        ready: /listening on/,
      });
      processes.push(proc);
      await proc.start();
      started.set(c.name, { url: `http://127.0.0.1:${port}`, container: c });
    }

    // Every probe of the manifest, on the port it names: 200.
    for (const { url, container: c } of started.values()) {
      for (const probe of ['readinessProbe', 'livenessProbe', 'startupProbe'].filter((p) => c[p])) {
        const { path: probePath, port } = c[probe].httpGet;
        // The manifest's probe port is the port the process listens on (here retargeted to `url`).
        expect(portOf(c, port)).toBe(listenPort(c));
        const res = await fetch(`${url}${probePath}`);
        expect({ container: c.name, probe, status: res.status }).toEqual({ container: c.name, probe, status: 200 });
      }
      // What the ServiceMonitor scrapes, with the status key.
      expect((await fetch(`${url}/metrics`)).status).toBe(401);
      const metrics = await fetch(`${url}/metrics`, { headers: { authorization: 'Bearer s' } });
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('iop_edge_resource_');
    }

    const gatewayUrl = started.get('gateway')!.url;
    const exporterUrl = started.get('status-exporter')!.url;
    const models = async () =>
      (
        (await (await fetch(`${gatewayUrl}/v1/models`, { headers: { authorization: 'Bearer k' } })).json()) as {
          data: { id: string }[];
        }
      ).data.map((m) => m.id);
    const exporterProviders = async () =>
      JSON.stringify(await (await fetch(`${exporterUrl}/status`, { headers: { authorization: 'Bearer s' } })).json());
    expect(await models()).toEqual(['m1']);

    writeLikeKubelet(volume, { 'edge.yaml': edgeYaml(prefix, ['m1', 'm2']) });
    expect(readdirSync(volume).filter((n) => n.startsWith('..2'))).toHaveLength(1);
    await waitUntil(async () => (await models()).includes('m2'), 5000, 'the gateway to reload the swapped ConfigMap');
    await waitUntil(
      async () => (await exporterProviders()).includes('"m2-p"'),
      5000,
      'the exporter to reload the swapped ConfigMap',
    );
    expect(readFileSync(path.join(volume, 'edge.yaml'), 'utf8')).toContain('m2');
  });
});
