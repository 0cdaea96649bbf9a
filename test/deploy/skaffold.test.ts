import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config.ts';
import { apiServerProblems, container, environment, helmBinary, localEnvironment, type Manifest, only, render } from '../support/helm.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a parsed YAML document, walked by the tests
const SKAFFOLD = parse(readFileSync(`${ROOT}skaffold.yaml`, 'utf8')) as Record<string, any>;

interface HelmRelease {
  name: string;
  chartPath: string;
  valuesFiles?: string[];
  setValueTemplates: Record<string, string>;
}

const ARTIFACT = SKAFFOLD['build'].artifacts[0] as { image: string; docker: { dockerfile: string } };
const DEV = (SKAFFOLD['profiles'] as Manifest[]).find((profile) => profile['name'] === 'dev') ?? {};

// What skaffold puts in the templates after a build (see its "Templated Fields" docs), with the
// artifact name's '-', '/', '.' and ':' written as '_'.
const BUILT = { repository: 'registry.example/team/kvcrud', tag: 'v1-2-g0abc', digest: `sha256:${'b'.repeat(64)}` };
const artifactKey = ARTIFACT.image.replaceAll(/[-/.:]/g, '_');
const TEMPLATE_VARIABLES: Record<string, string> = {
  [`IMAGE_REPO_${artifactKey}`]: BUILT.repository,
  [`IMAGE_TAG_${artifactKey}`]: BUILT.tag,
  [`IMAGE_DIGEST_${artifactKey}`]: BUILT.digest,
  GOOGLE_CLOUD_PROJECT: 'my-project',
  BIGTABLE_INSTANCE_ID: 'my-instance',
};

/** The --set values skaffold would pass: each template's {{.VARIABLE}} filled in. */
function filledIn(templates: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(templates).map(([key, template]) => [
      key,
      template.replaceAll(/\{\{\s*\.(\w+)\s*\}\}/g, (_match, name: string) => {
        const value = TEMPLATE_VARIABLES[name];
        if (value === undefined) throw new Error(`skaffold.yaml uses {{.${name}}}, which the test does not know`);
        return value;
      }),
    ]),
  );
}

/** Renders a skaffold helm release as skaffold would, with `--set` for each template. */
async function renderRelease(helm: string, release: HelmRelease): Promise<Manifest[]> {
  const sets = filledIn(release.setValueTemplates);
  // Helm's --set paths (bigtable.instanceIds[0]) become --set-json objects here.
  const set: Record<string, unknown> = {};
  for (const [path, value] of Object.entries(sets)) {
    const list = /^(.*)\[(\d+)\]$/.exec(path);
    if (list) set[list[1] ?? ''] = [value];
    else set[path] = value;
  }
  return render(helm, { release: release.name, valuesFiles: (release.valuesFiles ?? []).map((file) => `${ROOT}${file}`), set });
}

const BACKEND_MANIFESTS = (DEV['manifests']?.rawYaml ?? []) as string[];

/** The manifests of one backend the dev profile runs beside the chart (its Deployment and Service). */
function backendManifests(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(`${ROOT}${file}`, 'utf8')).map((document) => document.toJS() as Manifest);
}

function allBackendManifests(): Manifest[] {
  return BACKEND_MANIFESTS.flatMap(backendManifests);
}

/** host:port of a backend's Service. */
function serviceAddress(manifests: readonly Manifest[]): string {
  const service = only(manifests, 'Service');
  return `${service['metadata'].name}:${service['spec'].ports[0].port}`;
}

describe('skaffold.yaml', function () {
  this.timeout(60_000);

  it('uses the v4beta schema and builds the image from the Dockerfile', () => {
    expect(SKAFFOLD['apiVersion']).to.match(/^skaffold\/v4beta\d+$/);
    expect(SKAFFOLD['kind']).to.equal('Config');
    expect(SKAFFOLD['build'].artifacts).to.have.length(1);
    expect(existsSync(`${ROOT}${ARTIFACT.docker.dockerfile}`)).to.equal(true);
  });

  const releases: Array<[string, HelmRelease]> = [
    ['the default pipeline', SKAFFOLD['deploy'].helm.releases[0] as HelmRelease],
    ['the dev profile', DEV['deploy']?.helm?.releases?.[0] as HelmRelease],
  ];
  for (const [name, release] of releases) {
    it(`deploys the chart with the image it built, in ${name}`, () => {
      expect(release.chartPath).to.equal('charts/kvcrud');
      expect(existsSync(`${ROOT}${release.chartPath}/Chart.yaml`)).to.equal(true);
      expect(release.setValueTemplates).to.include({
        'image.repository': `{{.IMAGE_REPO_${artifactKey}}}`,
        'image.tag': `{{.IMAGE_TAG_${artifactKey}}}@{{.IMAGE_DIGEST_${artifactKey}}}`,
      });
      for (const file of release.valuesFiles ?? []) expect(existsSync(`${ROOT}${file}`), file).to.equal(true);
    });
  }

  it('forwards localhost:8080 to the Service the chart makes', async function () {
    const helm = await helmBinary(this);
    expect(SKAFFOLD['portForward']).to.deep.equal([{ resourceType: 'service', resourceName: 'kvcrud', port: 8080, localPort: 8080 }]);
    const service = only(await renderRelease(helm, releases[1]?.[1] as HelmRelease), 'Service');
    expect(service['metadata'].name).to.equal('kvcrud');
    expect(service['spec'].ports[0].port).to.equal(8080);
  });

  describe('the default pipeline, rendered as skaffold would', () => {
    it('runs the built image, pinned by digest, against the project and instance from the environment', async function () {
      const helm = await helmBinary(this);
      const manifests = await renderRelease(helm, releases[0]?.[1] as HelmRelease);
      expect(container(manifests)['image']).to.equal(`${BUILT.repository}:${BUILT.tag}@${BUILT.digest}`);
      // The tag@digest skaffold passes must not leak into a label value.
      expect(apiServerProblems(manifests)).to.deep.equal([]);
      const config = loadConfig(environment(manifests));
      expect(config.stores.default).to.deep.include({ driver: 'bigtable', settings: { projectId: 'my-project' } });
      expect(config.instanceIds).to.deep.equal(['my-instance']);
      // The chart's default: API keys, so a deployment to a real cluster is never open.
      expect(config.auth.modes).to.deep.equal(['apikey']);
    });
  });

  describe('the dev profile', () => {
    it('also deploys the Cloud Bigtable emulator, Redis and the Cloud Spanner emulator, with kubectl', () => {
      expect(DEV['deploy'].kubectl).to.deep.equal({});
      expect(BACKEND_MANIFESTS).to.deep.equal(['deploy/dev/bigtable-emulator.yaml', 'deploy/dev/redis.yaml', 'deploy/dev/spanner-emulator.yaml']);
      for (const file of BACKEND_MANIFESTS) {
        const manifests = backendManifests(file);
        expect(manifests.map((manifest) => manifest['kind']), file).to.deep.equal(['Deployment', 'Service']);
        const deployment = only(manifests, 'Deployment');
        const service = only(manifests, 'Service');
        const [port] = deployment['spec'].template.spec.containers[0]['ports'] as Manifest[];
        // The Service selects the backend's pods, on the port the backend listens on.
        expect(deployment['spec'].template.metadata.labels, file).to.deep.include(service['spec'].selector);
        expect(deployment['spec'].selector.matchLabels, file).to.deep.equal(service['spec'].selector);
        expect(service['spec'].ports[0].targetPort, file).to.equal(port?.['name']);
        expect(deployment['spec'].template.spec.containers[0]['securityContext'], file).to.deep.include({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
        });
        expect(deployment['spec'].template.spec.securityContext, file).to.include({ runAsNonRoot: true });
      }
    });

    it('runs the Bigtable emulator from the official image, listening on the port its pod declares', () => {
      const emulator = only(backendManifests('deploy/dev/bigtable-emulator.yaml'), 'Deployment')['spec'].template.spec.containers[0] as Manifest;
      expect(emulator['image']).to.match(/^gcr\.io\/google\.com\/cloudsdktool\/google-cloud-cli:\d+\.\d+\.\d+-emulators$/);
      const [port] = emulator['ports'] as Manifest[];
      expect(emulator['command'].join(' ')).to.contain(`--host-port=0.0.0.0:${port?.['containerPort']}`);
    });

    it('runs Redis from the official image at a version Memorystore serves (7.0), in memory only, on the port its pod declares', () => {
      const redis = only(backendManifests('deploy/dev/redis.yaml'), 'Deployment')['spec'].template.spec.containers[0] as Manifest;
      expect(redis['image']).to.match(/^redis:7\.0\.\d+-alpine$/);
      const args = (redis['args'] as string[]).join(' ');
      const [port] = redis['ports'] as Manifest[];
      expect(args).to.contain(`--port ${port?.['containerPort']}`);
      expect(args).to.contain('--save  --appendonly no');
      // kvcrud sets no TTL: a Redis that evicts would lose rows.
      expect(args).to.contain('--maxmemory-policy noeviction');
    });

    it('runs the Spanner emulator from the official image, its gRPC port (9010) the Service serves first', () => {
      const manifests = backendManifests('deploy/dev/spanner-emulator.yaml');
      const emulator = only(manifests, 'Deployment')['spec'].template.spec.containers[0] as Manifest;
      expect(emulator['image']).to.match(/^gcr\.io\/cloud-spanner-emulator\/emulator:\d+\.\d+\.\d+$/);
      const [grpc, http] = emulator['ports'] as Manifest[];
      expect(grpc).to.include({ name: 'grpc', containerPort: 9010 });
      expect(http).to.include({ name: 'http', containerPort: 9020 });
      const command = (emulator['command'] as string[]).join(' ');
      expect(command).to.contain('--hostname 0.0.0.0');
      expect(command).to.contain(`--grpc_port ${grpc?.['containerPort']}`);
      expect(command).to.contain(`--http_port ${http?.['containerPort']}`);
      expect(serviceAddress(manifests)).to.equal('spanner-emulator:9010');
    });

    it('points the service at all three, in a configuration the service accepts: Bigtable serves v1, Redis and Spanner are more stores', async function () {
      const helm = await helmBinary(this);
      const manifests = await renderRelease(helm, releases[1]?.[1] as HelmRelease);
      expect(apiServerProblems([...manifests, ...allBackendManifests()])).to.deep.equal([]);
      expect(container(manifests)['image']).to.equal(`${BUILT.repository}:${BUILT.tag}@${BUILT.digest}`);
      const directory = mkdtempSync(join(tmpdir(), 'kvcrud-skaffold-'));
      try {
        const config = loadConfig(localEnvironment(manifests, directory, `${ROOT}package.json`));
        expect(config.stores.default).to.deep.include({ name: 'main', driver: 'bigtable' });
        expect(config.stores.default.settings).to.include({ emulatorHost: serviceAddress(backendManifests('deploy/dev/bigtable-emulator.yaml')) });
        const cache = config.stores.all.find((store) => store.driver === 'redis');
        expect(cache?.settings).to.include({ url: `redis://${serviceAddress(backendManifests('deploy/dev/redis.yaml'))}` });
        const ledger = config.stores.all.find((store) => store.driver === 'spanner');
        expect(ledger?.settings).to.deep.equal({ projectId: 'local-dev', instance: 'dev', emulatorHost: serviceAddress(backendManifests('deploy/dev/spanner-emulator.yaml')) });
        expect(config.instanceIds.length).to.be.at.least(1);
        // The throwaway dev cluster answers plain curl: no authentication.
        expect(config.auth.modes).to.deep.equal([]);
      } finally {
        rmSync(directory, { recursive: true, force: true });
      }
    });
  });
});
