import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { helmPath } from '../../scripts/helm.ts';

export const CHART_DIR = new URL('../../charts/kvcrud/', import.meta.url).pathname;

/** A rendered Kubernetes object, as parsed from helm's output. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- Kubernetes objects, walked by the tests
export type Manifest = Record<string, any>;

export interface HelmResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

let found: Promise<string | Error> | undefined;
let warned = false;

/**
 * helmBinary returns the path of Helm v4 (from the npm package, see scripts/helm.ts), or skips
 * the calling suite loudly when it cannot be had; under CI=true that fails instead.
 */
export async function helmBinary(context: Mocha.Context): Promise<string> {
  found ??= helmPath().catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
  const helm = await found;
  if (typeof helm === 'string') return helm;
  if (process.env['CI'] === 'true') throw new Error(`CI=true but helm is not available: ${helm.message}`);
  if (!warned) {
    warned = true;
    process.stderr.write(`\n  !!! No helm (${helm.message}): CHART TESTS ARE SKIPPED. Run npm ci to install it.\n\n`);
  }
  context.skip();
}

// Helm's caches and config go to a private directory, and no cluster is ever reached.
const HELM_HOME = mkdtempSync(join(tmpdir(), 'kvcrud-helm-home-'));
const HELM_ENV = {
  PATH: process.env['PATH'] ?? '',
  HOME: HELM_HOME,
  HELM_CACHE_HOME: join(HELM_HOME, 'cache'),
  HELM_CONFIG_HOME: join(HELM_HOME, 'config'),
  HELM_DATA_HOME: join(HELM_HOME, 'data'),
  KUBECONFIG: join(HELM_HOME, 'no-kubeconfig'),
};

/** Runs helm with the arguments; resolves with its exit code and output, whatever the code. */
export function runHelm(helm: string, args: readonly string[]): Promise<HelmResult> {
  return new Promise((resolve) => {
    execFile(helm, args, { env: HELM_ENV, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

export interface RenderOptions {
  /** Values files, relative to the chart directory (e.g. ci/default-values.yaml) or absolute. */
  readonly valuesFiles?: readonly string[];
  /** --set-json pairs: path -> any JSON value. */
  readonly set?: Readonly<Record<string, unknown>>;
  readonly release?: string;
  readonly namespace?: string;
}

function valueArgs(options: RenderOptions): string[] {
  const files = (options.valuesFiles ?? []).flatMap((file) => ['-f', file.startsWith('/') ? file : join(CHART_DIR, file)]);
  const sets = Object.entries(options.set ?? {}).flatMap(([path, value]) => ['--set-json', `${path}=${JSON.stringify(value)}`]);
  return [...files, ...sets];
}

/** `helm template`: resolves with its result, for tests of failures. */
export function template(helm: string, options: RenderOptions = {}): Promise<HelmResult> {
  return runHelm(helm, ['template', options.release ?? 'kvcrud', CHART_DIR, '--namespace', options.namespace ?? 'apps', ...valueArgs(options)]);
}

/** Renders the chart and parses every manifest; throws with helm's message when it fails. */
export async function render(helm: string, options: RenderOptions = {}): Promise<Manifest[]> {
  const result = await template(helm, options);
  if (result.code !== 0) throw new Error(`helm template failed (${result.code}):\n${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((document) => {
      if (document.errors.length > 0) throw new Error(`helm rendered invalid YAML: ${document.errors.join('; ')}`);
      return document.toJS() as Manifest | null;
    })
    .filter((manifest): manifest is Manifest => manifest !== null);
}

/** The NOTES.txt an install with these values would print (a client-side dry run). */
export async function notes(helm: string, options: RenderOptions = {}): Promise<string> {
  const result = await runHelm(helm, ['install', options.release ?? 'kvcrud', CHART_DIR, '--dry-run=client', '--namespace', options.namespace ?? 'apps', ...valueArgs(options)]);
  if (result.code !== 0) throw new Error(`helm install --dry-run failed (${result.code}):\n${result.stderr}`);
  return result.stdout.slice(result.stdout.indexOf('NOTES:'));
}

/** The one manifest of this kind (and name, when given); throws when there is not exactly one. */
export function only(manifests: readonly Manifest[], kind: string, name?: string): Manifest {
  const matches = manifests.filter((manifest) => manifest['kind'] === kind && (name === undefined || manifest['metadata']?.name === name));
  if (matches.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${matches.length}`);
  return matches[0] as Manifest;
}

/** The kvcrud container of the Deployment. */
export function container(manifests: readonly Manifest[]): Manifest {
  return only(manifests, 'Deployment')['spec'].template.spec.containers[0] as Manifest;
}

/** The ConfigMap the container takes its environment from (envFrom), not e.g. the grants file's. */
export function serviceConfigMap(manifests: readonly Manifest[]): Manifest {
  const envFrom = (container(manifests)['envFrom'] ?? []) as Array<{ configMapRef?: { name: string } }>;
  const [name, ...more] = envFrom.flatMap((source) => (source.configMapRef ? [source.configMapRef.name] : []));
  if (name === undefined || more.length > 0) throw new Error(`expected envFrom to name one ConfigMap, found ${JSON.stringify(envFrom)}`);
  return only(manifests, 'ConfigMap', name);
}

/** The service's environment: the ConfigMap the container reads, then its own env entries. */
export function environment(manifests: readonly Manifest[]): Record<string, string> {
  const env = (container(manifests)['env'] ?? []) as Array<{ name: string; value?: string }>;
  return { ...(serviceConfigMap(manifests)['data'] as Record<string, string>), ...Object.fromEntries(env.map((entry) => [entry.name, entry.value ?? '<valueFrom>'])) };
}

/**
 * The service's environment as the chart renders it, made to run on this machine: the files
 * the pod would have mounted are written to `directory` (STORES_FILE, from its ConfigMap), and
 * each file a store reads from a Secret, which exists only in the pod, is replaced by `readableFile`.
 */
export function localEnvironment(manifests: readonly Manifest[], directory: string, readableFile: string): Record<string, string> {
  const env = environment(manifests);
  if (env['GOOGLE_APPLICATION_CREDENTIALS'] !== undefined) env['GOOGLE_APPLICATION_CREDENTIALS'] = readableFile;
  const storesFile = env['STORES_FILE'];
  if (storesFile !== undefined) {
    const mounted = storesConfigMap(manifests, storesFile);
    const local = join(directory, 'stores.yaml');
    // Every file a store reads from a Secret (credentialsFile, authStringFile, caFile) is mounted there.
    writeFileSync(local, mounted.replace(/^(\s*\w+File: )\/var\/run\/secrets\/kvcrud\/stores\/.*$/gm, `$1${readableFile}`));
    env['STORES_FILE'] = local;
  }
  return env;
}

/** The content of the ConfigMap file the Deployment mounts at `path`. */
export function storesConfigMap(manifests: readonly Manifest[], path: string): string {
  const spec = only(manifests, 'Deployment')['spec'].template.spec;
  const mount = (container(manifests)['volumeMounts'] as Manifest[]).find((candidate) => path.startsWith(`${candidate['mountPath']}/`));
  const volume = (spec.volumes as Manifest[]).find((candidate) => candidate['name'] === mount?.['name']);
  const configMap = only(manifests, 'ConfigMap', volume?.['configMap']?.name);
  const content = (configMap['data'] as Record<string, string>)[path.slice(String(mount?.['mountPath']).length + 1)];
  if (content === undefined) throw new Error(`nothing is mounted at ${path}`);
  return content;
}

// Kubernetes' rules for object names (DNS-1123 subdomain; Services and most others: a label) and
// label values; the API server refuses an object that breaks them.
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/** What the API server would refuse in these manifests: bad names or label values. */
export function apiServerProblems(manifests: readonly Manifest[]): string[] {
  const problems: string[] = [];
  for (const manifest of manifests) {
    const id = `${manifest['kind']} ${manifest['metadata']?.name}`;
    if (!DNS_LABEL.test(String(manifest['metadata']?.name))) problems.push(`${id}: name is not a DNS-1123 label`);
    const labelSets: Array<[string, Record<string, unknown> | undefined]> = [
      ['labels', manifest['metadata']?.labels],
      ['pod labels', manifest['spec']?.template?.metadata?.labels],
      ['selector', manifest['spec']?.selector?.matchLabels ?? (manifest['kind'] === 'Service' ? manifest['spec']?.selector : undefined)],
    ];
    for (const [where, labels] of labelSets) {
      for (const [key, value] of Object.entries(labels ?? {})) {
        if (typeof value !== 'string' || !LABEL_VALUE.test(value)) problems.push(`${id}: ${where} ${key}=${String(value)} is not a valid label value`);
      }
    }
  }
  return problems;
}

/** The chart's ci/*-values.yaml files (the lint variants), relative to the chart. */
export function ciValuesFiles(): string[] {
  return readdirSync(join(CHART_DIR, 'ci'))
    .filter((file) => file.endsWith('-values.yaml'))
    .sort()
    .map((file) => `ci/${file}`);
}
