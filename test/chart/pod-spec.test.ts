import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { DockerfileParser } from 'dockerfile-ast';
import { parse } from 'yaml';
import { CHART_DIR, ciValuesFiles, container, environment, helmBinary, only, render } from '../support/helm.ts';

/** The USER of the image's last stage, as uid and gid. */
function imageUser(): { uid: number; gid: number } {
  const dockerfile = DockerfileParser.parse(readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8'));
  const user = dockerfile.getInstructions().filter((instruction) => instruction.getKeyword() === 'USER').at(-1)?.getArgumentsContent() ?? '';
  const [uid = NaN, gid = NaN] = user.split(':').map(Number);
  return { uid, gid };
}

/** How long /readyz waits for the store (src/http/routes/health.ts); a probe must wait longer. */
const READY_CHECK_MS = 800;

describe('the Helm chart pod spec', function () {
  this.timeout(60_000);
  let helm: string;

  before(async function () {
    helm = await helmBinary(this);
  });

  for (const valuesFile of ciValuesFiles()) {
    it(`is locked down in ${valuesFile}: non-root as the image's user, read-only root, no privileges`, async () => {
      const manifests = await render(helm, { valuesFiles: [valuesFile] });
      const pod = only(manifests, 'Deployment')['spec'].template.spec;
      const { uid, gid } = imageUser();
      expect(pod.securityContext).to.deep.include({ runAsNonRoot: true, runAsUser: uid, runAsGroup: gid, fsGroup: gid, seccompProfile: { type: 'RuntimeDefault' } });
      expect(container(manifests)['securityContext']).to.deep.equal({
        runAsNonRoot: true,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        privileged: false,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
      // No Kubernetes API token, unless the variant fetches the API server's signing keys with it.
      const values = parse(readFileSync(`${CHART_DIR}${valuesFile}`, 'utf8')) as { auth?: { oidc?: { inCluster?: boolean } } };
      expect(pod.automountServiceAccountToken).to.equal(values.auth?.oidc?.inCluster === true);
      expect(pod.hostNetwork ?? false).to.equal(false);
      // The read-only root still leaves the service a scratch /tmp.
      expect(container(manifests)['volumeMounts']).to.deep.include({ name: 'tmp', mountPath: '/tmp' });
    });
  }

  it('probes liveness on /healthz and readiness on /readyz, on the port the service listens on', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { containerPort: 9000 } });
    const main = container(manifests);
    expect(main['ports']).to.deep.equal([
      { name: 'http', containerPort: 9000, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
    ]);
    expect(environment(manifests)['PORT']).to.equal('9000');
    expect(main['livenessProbe']).to.deep.include({ httpGet: { path: '/healthz', port: 'http' } });
    expect(main['readinessProbe']).to.deep.include({ httpGet: { path: '/readyz', port: 'http' } });
    expect(main['startupProbe']).to.deep.include({ httpGet: { path: '/healthz', port: 'http' } });
    // /readyz answers within 800 ms by itself; the kubelet must not give up first.
    expect(main['readinessProbe'].timeoutSeconds * 1000).to.be.above(READY_CHECK_MS);
    const service = only(manifests, 'Service');
    expect(service['spec'].ports).to.deep.equal([
      { name: 'http', port: 8080, targetPort: 'http', protocol: 'TCP' },
      { name: 'metrics', port: 9090, targetPort: 'metrics', protocol: 'TCP' },
    ]);
    expect(service['spec'].selector).to.deep.equal(only(manifests, 'Deployment')['spec'].selector.matchLabels);
  });

  it('gives the pod time to drain: preStop sleep, then SHUTDOWN_TIMEOUT_MS, within the grace period', async () => {
    for (const [shutdown, grace] of [
      [{ timeoutMs: 25_000, preStopSleepSeconds: 5 }, 35],
      [{ timeoutMs: 40_500, preStopSleepSeconds: 10 }, 56],
      [{ timeoutMs: 0, preStopSleepSeconds: 0 }, 5],
    ] as const) {
      const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { shutdown } });
      const pod = only(manifests, 'Deployment')['spec'].template.spec;
      expect(container(manifests)['lifecycle']).to.deep.equal({ preStop: { sleep: { seconds: shutdown.preStopSleepSeconds } } });
      expect(environment(manifests)['SHUTDOWN_TIMEOUT_MS']).to.equal(String(shutdown.timeoutMs));
      expect(pod.terminationGracePeriodSeconds, JSON.stringify(shutdown)).to.equal(grace);
      expect(pod.terminationGracePeriodSeconds).to.be.above(shutdown.preStopSleepSeconds + shutdown.timeoutMs / 1000);
    }
  });

  it('passes resources, scheduling and pod metadata through', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/production-values.yaml'] });
    const template = only(manifests, 'Deployment')['spec'].template;
    expect(container(manifests)['resources']).to.deep.equal({ requests: { cpu: '250m', memory: '288Mi' }, limits: { memory: '512Mi' } });
    expect(container(manifests)['image']).to.match(/^us-docker\.pkg\.dev\/my-project\/kvcrud\/kvcrud@sha256:[0-9a-f]{64}$/);
    expect(template.spec.imagePullSecrets).to.deep.equal([{ name: 'registry-credentials' }]);
    expect(template.spec.priorityClassName).to.equal('high-priority');
    expect(template.spec.topologySpreadConstraints[0].topologyKey).to.equal('topology.kubernetes.io/zone');
    expect(template.spec.serviceAccountName).to.equal('kvcrud-gateway');
    expect(template.metadata.annotations).to.include({ 'example.com/team': 'storage' });
    expect(template.metadata.labels).to.include({ tier: 'backend', 'app.kubernetes.io/name': 'kvcrud' });
  });
});
