/**
 * Summarises a V8 CPU profile (`node --cpu-prof`) as the functions with the most self time, or
 * (`--by-package`) as the self time of each package, each of the service's own modules, each Node
 * internal subsystem and the collector, in µs per request when `--requests N` says how many
 * requests the profile covers (idle time and module loading left out), or (`--by-component`) as
 * the time of each component of a request's path with what it calls in Node (timeByComponent).
 * Run directly: `node bench/profile-summary.ts <file.cpuprofile> [top] [--by-package | --by-component] [--requests N]`.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTime {
  readonly fn: string;
  readonly where: string;
  readonly ms: number;
  readonly percent: number;
}

const ROOT = new URL('../', import.meta.url).pathname;

/** The `top` functions by self time, with where they are defined (node_modules package or file). */
function readProfile(path: string): CpuProfile {
  return JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
}

export function topSelfTime(path: string, top = 15): SelfTime[] {
  const profile = readProfile(path);
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const micros = new Map<string, { fn: string; where: string; us: number }>();
  let total = 0;
  profile.samples.forEach((id, index) => {
    // timeDeltas[i] is the time since the previous sample; it is spent in sample i's node.
    const delta = profile.timeDeltas[index] ?? 0;
    const frame = frames.get(id);
    if (frame === undefined) return;
    total += delta;
    const where = describeLocation(frame.url, frame.lineNumber);
    const fn = frame.functionName || '(anonymous)';
    const key = `${fn} ${where}`;
    const entry = micros.get(key) ?? { fn, where, us: 0 };
    entry.us += delta;
    micros.set(key, entry);
  });
  return [...micros.values()]
    .sort((a, b) => b.us - a.us)
    .slice(0, top)
    .map((entry) => ({
      fn: entry.fn,
      where: entry.where,
      ms: Math.round(entry.us / 1000),
      percent: Math.round((entry.us / total) * 1000) / 10,
    }));
}

function describeLocation(url: string, line: number): string {
  if (url === '') return '';
  const path = url.startsWith('file://') ? new URL(url).pathname : url;
  const inPackage = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(path);
  if (inPackage) return `${inPackage[1]}/${inPackage[2]}:${line + 1}`;
  return `${path.startsWith(ROOT) ? relative(ROOT, path) : path}:${line + 1}`;
}

export function formatSelfTime(rows: readonly SelfTime[]): string {
  return rows.map((row) => `${row.percent.toFixed(1).padStart(5)}%  ${row.fn}  ${row.where}`).join('\n');
}

export interface PackageTime {
  readonly where: string;
  /** Self time, in µs per request when the request count is given, otherwise in ms. */
  readonly amount: number;
  readonly percent: number;
}

/**
 * Self time by where it is spent: a node_modules package, a module of the service (`kvcrud:` and
 * its path under src/), a Node subsystem (`node:http2`, `node:streams`…), or V8's own entries
 * ((garbage collector), (program)). Idle samples and those under module loading are left out.
 */
export function selfTimeByPackage(path: string, requests?: number): { rows: PackageTime[]; busyMs: number } {
  const profile = readProfile(path);
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const loading = (id: number) => {
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
      if (byId.get(at)?.callFrame.url.startsWith('node:internal/modules/') === true) return true;
    }
    return false;
  };
  const micros = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, index) => {
    const frame = byId.get(id)?.callFrame;
    if (frame === undefined || frame.functionName === '(idle)' || loading(id)) return;
    const delta = profile.timeDeltas[index] ?? 0;
    total += delta;
    const where = packageOf(frame.url, frame.functionName);
    micros.set(where, (micros.get(where) ?? 0) + delta);
  });
  const rows = [...micros]
    .sort((a, b) => b[1] - a[1])
    .map(([where, us]) => ({ where, amount: requests === undefined ? us / 1000 : us / requests, percent: Math.round((us / total) * 1000) / 10 }));
  return { rows, busyMs: total / 1000 };
}

/** A module of the service, built (dist/) or run from source (src/). */
const OWN_MODULE = new RegExp(`^file://${ROOT.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?:dist|src)/(.*)\\.[jt]s$`);

function packageOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : `native ${functionName}`;
  const inPackage = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (inPackage?.[1] !== undefined) return inPackage[1];
  const own = OWN_MODULE.exec(url);
  if (own?.[1] !== undefined) return `kvcrud:${own[1]}`;
  if (url.startsWith('node:')) return url.replace('node:internal/', 'node:').replace(/^(node:[^/]+).*$/, '$1');
  return url.startsWith('file://') ? relative(ROOT, new URL(url).pathname) : url;
}

/** Packages that are one component of a request's path, by the name a summary gives them. */
const COMPONENTS: readonly (readonly [RegExp, string])[] = [
  [/^(koa|koa-compose|delegates|ee-first|on-finished|koa-convert|http-errors|statuses|type-is|content-type|accepts|cookies|vary|encodeurl|escape-html|fresh|only|destroy|mime-types|negotiator)$/, 'koa'],
  [/^@koa\/router$|^path-to-regexp$/, '@koa/router'],
  [/^(pino|sonic-boom|fast-redact|pino-std-serializers|quick-format-unescaped|atomic-sleep|on-exit-leak-free|thread-stream|safe-stable-stringify)$/, 'pino'],
  [/^(prom-client|tdigest|bintrees)$/, 'prom-client'],
  [/^@opentelemetry\//, 'otel'],
  [/^@redis\/|^redis$|^cluster-key-slot$/, 'node-redis'],
  [/^(joi|@hapi\/.*|@sideway\/.*)$/, 'joi'],
  [/^kvcrud:http\/admission\//, 'kvcrud:http/admission'],
  [/^kvcrud:store\/redis\//, 'kvcrud:store/redis'],
];

/**
 * Time by component, children included: each sample goes to the innermost frame on its stack that
 * belongs to a package or a module of the service (see COMPONENTS), so the time a middleware spends
 * in Node or in a native call counts for it; what Node's HTTP server and its sockets do for a
 * response counts as `node:http` when no such frame is nearer, and V8's collector as itself.
 */
export function timeByComponent(path: string, requests?: number): { rows: PackageTime[]; busyMs: number } {
  const profile = readProfile(path);
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const componentOf = new Map<number, string | undefined>();
  const classify = (leaf: number): string | undefined => {
    let nodeSubsystem: string | undefined;
    for (let at: number | undefined = leaf; at !== undefined; at = parentOf.get(at)) {
      const frame = byId.get(at)?.callFrame;
      if (frame === undefined) break;
      if (frame.url.startsWith('node:internal/modules/')) return undefined;
      if (frame.url === '') {
        if (at === leaf && frame.functionName.startsWith('(')) return frame.functionName;
        continue;
      }
      const where = packageOf(frame.url, frame.functionName);
      if (where.startsWith('node:')) {
        if (/^node:(_http_|http$)/.test(where)) return 'node:http';
        nodeSubsystem ??= where;
        continue;
      }
      return COMPONENTS.find(([pattern]) => pattern.test(where))?.[1] ?? where;
    }
    return nodeSubsystem ?? '(native, no caller)';
  };
  const micros = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, index) => {
    if (byId.get(id)?.callFrame.functionName === '(idle)') return;
    if (!componentOf.has(id)) componentOf.set(id, classify(id));
    const component = componentOf.get(id);
    if (component === undefined) return;
    const delta = profile.timeDeltas[index] ?? 0;
    total += delta;
    micros.set(component, (micros.get(component) ?? 0) + delta);
  });
  const rows = [...micros]
    .sort((a, b) => b[1] - a[1])
    .map(([where, us]) => ({ where, amount: requests === undefined ? us / 1000 : us / requests, percent: Math.round((us / total) * 1000) / 10 }));
  return { rows, busyMs: total / 1000 };
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { 'by-package': { type: 'boolean', default: false }, 'by-component': { type: 'boolean', default: false }, requests: { type: 'string' } } });
  const [path, top] = positionals;
  if (path === undefined) {
    process.stderr.write('usage: node bench/profile-summary.ts <file.cpuprofile> [top] [--by-package | --by-component] [--requests N]\n');
    process.exit(2);
  }
  const count = top === undefined ? 15 : Number(top);
  if (values['by-package'] || values['by-component']) {
    const requests = values.requests === undefined ? undefined : Number(values.requests);
    const { rows, busyMs } = (values['by-component'] ? timeByComponent : selfTimeByPackage)(path, requests);
    const unit = requests === undefined ? 'ms' : 'µs/request';
    process.stdout.write(`busy ${requests === undefined ? `${Math.round(busyMs)} ms` : `${Math.round((busyMs * 1000) / requests)} µs/request`}\n`);
    process.stdout.write(`${rows.slice(0, count).map((row) => `${row.amount.toFixed(1).padStart(8)} ${unit}  ${row.percent.toFixed(1).padStart(5)}%  ${row.where}`).join('\n')}\n`);
  } else {
    process.stdout.write(`${formatSelfTime(topSelfTime(path, count))}\n`);
  }
}
