import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';

/** A Kubernetes object as written (plain YAML data). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: any;
};

/** The schema of every kind the manifests may use (kubernetes-models, Kubernetes 1.32 OpenAPI; Prometheus Operator and KEDA CRDs). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'v1/ConfigMap': ConfigMap,
  'v1/Namespace': Namespace,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
};

/**
 * Problems of `object` against its Kubernetes schema; empty when valid.
 * A kind without a model here is a problem too (add its model to check it).
 */
export function schemaProblems(object: K8sObject): string[] {
  const Model = MODELS[`${object.apiVersion}/${object.kind}`];
  if (!Model)
    return [`${object.apiVersion} ${object.kind} has no schema here: add its kubernetes-models class to MODELS`];
  try {
    new Model(object).validate();
    return [];
  } catch (err) {
    return [(err as Error).message];
  }
}

/** The keys of kustomization.yaml this loader understands; any other one is reported (model it before using it). */
const KNOWN_KEYS = new Set([
  'apiVersion',
  'kind',
  'namespace',
  'resources',
  'images',
  'configMapGenerator',
  'secretGenerator',
]);

interface Generator {
  name: string;
  behavior?: 'create' | 'replace' | 'merge';
  files?: string[];
  literals?: string[];
  options?: { disableNameSuffixHash?: boolean };
}

/** A kustomization with what it brings: its objects (resources, recursively) and its generators. */
export interface Kustomization {
  dir: string;
  file: Record<string, unknown>;
  /** Objects from resource files, this kustomization's and its bases' (each with the file it came from). */
  objects: { file: string; object: K8sObject }[];
  /** ConfigMaps and Secrets the generators make, as kustomize would (behavior replace applied; no name hash). */
  generated: K8sObject[];
  /** Generator options by generated name (e.g. disableNameSuffixHash). */
  generators: Map<string, Generator>;
  /** `images:` rewrites, by image name. */
  images: Map<string, string>;
  /** What is wrong with the kustomization itself (unknown keys, missing files). */
  problems: string[];
}

/**
 * Reads `dir`/kustomization.yaml and, recursively, the bases it lists: no kustomize binary is
 * needed for the checks (none is packaged for npm or Debian), so this covers the subset of
 * kustomize the manifests use and reports any other key as a problem.
 */
export function loadKustomization(dir: string): Kustomization {
  const text = readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8');
  const file = parseAllDocuments(text)[0]?.toJSON() as Record<string, unknown>;
  const k: Kustomization = {
    dir,
    file,
    objects: [],
    generated: [],
    generators: new Map(),
    images: new Map(),
    problems: [],
  };
  for (const key of Object.keys(file))
    if (!KNOWN_KEYS.has(key)) k.problems.push(`${dir}: kustomization key "${key}" is not modelled by the checks`);
  if (file['apiVersion'] !== 'kustomize.config.k8s.io/v1beta1' || file['kind'] !== 'Kustomization')
    k.problems.push(`${dir}: not a kustomize.config.k8s.io/v1beta1 Kustomization`);
  const namespace = file['namespace'] as string | undefined;

  const generatedByName = new Map<string, K8sObject>();
  for (const entry of (file['resources'] as string[] | undefined) ?? []) {
    const target = path.join(dir, entry);
    if (!existsSync(target)) {
      k.problems.push(`${dir}: resource ${entry} does not exist`);
      continue;
    }
    if (statSync(target).isDirectory()) {
      const base = loadKustomization(target);
      k.problems.push(...base.problems);
      k.objects.push(...base.objects);
      for (const g of base.generated) generatedByName.set(`${g.kind}/${g.metadata.name}`, g);
      for (const [name, g] of base.generators) k.generators.set(name, g);
      for (const [name, image] of base.images) k.images.set(name, image);
      continue;
    }
    for (const doc of parseAllDocuments(readFileSync(target, 'utf8'))) {
      if (doc.errors.length) k.problems.push(`${target}: ${doc.errors[0].message}`);
      const object = doc.toJSON() as K8sObject | null;
      if (object) k.objects.push({ file: target, object });
    }
  }
  const generate = (kind: 'ConfigMap' | 'Secret', list: Generator[] | undefined) => {
    for (const g of list ?? []) {
      const data: Record<string, string> = {};
      for (const f of g.files ?? []) {
        const source = path.join(dir, f);
        if (!existsSync(source)) k.problems.push(`${dir}: ${kind} generator ${g.name}: ${f} does not exist`);
        else data[path.basename(f)] = readFileSync(source, 'utf8');
      }
      for (const literal of g.literals ?? [])
        data[literal.slice(0, literal.indexOf('='))] = literal.slice(literal.indexOf('=') + 1);
      const id = `${kind}/${g.name}`;
      if ((g.behavior ?? 'create') === 'create' && generatedByName.has(id))
        k.problems.push(`${dir}: ${id} is generated twice (use behavior: replace)`);
      if (g.behavior === 'replace' && !generatedByName.has(id))
        k.problems.push(`${dir}: ${id} has behavior replace but no base generates it`);
      const body = kind === 'Secret' ? { type: 'Opaque', stringData: data } : { data };
      generatedByName.set(id, { apiVersion: 'v1', kind, metadata: { name: g.name }, ...body });
      k.generators.set(g.name, g);
    }
  };
  generate('ConfigMap', file['configMapGenerator'] as Generator[] | undefined);
  generate('Secret', file['secretGenerator'] as Generator[] | undefined);
  k.generated = [...generatedByName.values()];
  for (const image of (file['images'] as { name: string; newName?: string; newTag?: string }[] | undefined) ?? []) {
    k.images.set(image.name, `${image.newName ?? image.name}${image.newTag ? `:${image.newTag}` : ''}`);
  }
  if (namespace) {
    for (const o of [...k.objects.map((x) => x.object), ...k.generated])
      if (o.kind !== 'Namespace') o.metadata.namespace = namespace;
  }
  return k;
}

/** The one object of `kind` (and `name`, when given). @throws Error when there is not exactly one. */
export function one(k: Kustomization, kind: string, name?: string): K8sObject {
  const found = [...k.objects.map((o) => o.object), ...k.generated].filter(
    (o) => o.kind === kind && (name === undefined || o.metadata.name === name),
  );
  if (found.length !== 1)
    throw new Error(`${k.dir}: expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`);
  return found[0];
}
