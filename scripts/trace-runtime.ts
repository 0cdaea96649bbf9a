/**
 * `node scripts/trace-runtime.ts OUT`: copies into OUT the files the service can load at run time,
 * and nothing else: dist/, package.json, and of node_modules only the files reached from
 * dist/index.js (imports, requires, and the files they read, such as the Google clients' protos),
 * as @vercel/nft traces them. The image ships OUT: the production dependencies hold about 230 MB
 * the service never loads (googleapis alone, pulled in by the Bigtable client's metrics exporter,
 * is over 100 MB), and tests/image/runtime-files.test.ts runs the service from a traced copy
 * against every store.
 *
 * Run after `npm run build`, from the repository (or the image's build stage).
 */
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { nodeFileTrace } from '@vercel/nft';

const ROOT = resolve(new URL('..', import.meta.url).pathname);

/**
 * Entry points loaded only under conditions nft cannot follow: every OTLP exporter NodeSDK may
 * pick from OTEL_EXPORTER_OTLP_PROTOCOL is required by name at run time.
 */
const CONDITIONAL_ENTRIES = [
  '@opentelemetry/exporter-trace-otlp-proto',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/exporter-trace-otlp-grpc',
];

/** Files read through a path computed at run time (src/http/routes/docs.ts serves these). */
const READ_AT_RUN_TIME = ['package.json', 'swagger-ui-bundle.js', 'swagger-ui-standalone-preset.js', 'swagger-ui.css'].map(
  (file) => `node_modules/swagger-ui-dist/${file}`,
);

export async function traceRuntime(out: string): Promise<{ files: number }> {
  const require = createRequire(join(ROOT, 'package.json'));
  const entries = [join(ROOT, 'dist/index.js'), ...CONDITIONAL_ENTRIES.map((name) => require.resolve(name))];
  const { fileList } = await nodeFileTrace(entries, { base: ROOT });
  rmSync(out, { recursive: true, force: true });
  // The service runs with --enable-source-maps: each traced dist/*.js keeps its map beside it,
  // so a stack trace names the TypeScript source.
  const sourceMaps = [...fileList].filter((file) => file.startsWith('dist/') && file.endsWith('.js')).map((file) => `${file}.map`);
  const built = new Set(readdirSync(join(ROOT, 'dist'), { recursive: true, encoding: 'utf8' }).map((file) => `dist/${file}`));
  const files = new Set([...fileList, 'package.json', ...READ_AT_RUN_TIME, ...sourceMaps.filter((map) => built.has(map))]);
  for (const file of files) {
    const target = join(out, file);
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(join(ROOT, file), target);
  }
  return { files: files.size };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const out = process.argv[2];
  if (out === undefined) throw new Error('usage: node scripts/trace-runtime.ts OUT');
  const { files } = await traceRuntime(resolve(out));
  process.stdout.write(`${files} files in ${out}\n`);
}
