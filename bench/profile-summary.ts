/**
 * Summarises a V8 CPU profile (`node --cpu-prof`) as the functions with the most self time.
 * Run directly: `node bench/profile-summary.ts <file.cpuprofile> [top]`.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
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
export function topSelfTime(path: string, top = 15): SelfTime[] {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
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

if (import.meta.main) {
  const [path, top] = process.argv.slice(2);
  if (path === undefined) {
    process.stderr.write('usage: node bench/profile-summary.ts <file.cpuprofile> [top]\n');
    process.exit(2);
  }
  process.stdout.write(`${formatSelfTime(topSelfTime(path, top === undefined ? 15 : Number(top)))}\n`);
}
