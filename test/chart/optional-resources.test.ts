import { expect } from 'chai';
import { helmBinary, type Manifest, only, render } from '../support/helm.ts';

describe('the Helm chart optional resources', function () {
  this.timeout(60_000);
  let helm: string;
  let production: Manifest[];

  before(async function () {
    helm = await helmBinary(this);
    production = await render(helm, { valuesFiles: ['ci/production-values.yaml'] });
  });

  it('are all off by default', async () => {
    const kinds = (await render(helm, { valuesFiles: ['ci/default-values.yaml'] })).map((manifest) => manifest['kind']).sort();
    // The Secret is the API keys file of the default auth.mode (apikey), not an optional resource.
    expect(kinds).to.deep.equal(['ConfigMap', 'Deployment', 'Secret', 'Service', 'ServiceAccount']);
  });

  it('autoscale on CPU (memory stays near the request whatever the load), leaving the replica count to the autoscaler', () => {
    const hpa = only(production, 'HorizontalPodAutoscaler');
    expect(hpa['apiVersion']).to.equal('autoscaling/v2');
    expect(hpa['spec']).to.deep.include({ minReplicas: 3, maxReplicas: 12, scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'kvcrud' } });
    expect(hpa['spec'].metrics.map((metric: Manifest) => [metric['resource'].name, metric['resource'].target.averageUtilization])).to.deep.equal([
      ['cpu', 60],
    ]);
    expect(only(production, 'Deployment')['spec']).to.not.have.property('replicas');
  });

  it('limit disruptions to the release pods', () => {
    const pdb = only(production, 'PodDisruptionBudget');
    expect(pdb['apiVersion']).to.equal('policy/v1');
    expect(pdb['spec']).to.deep.equal({ selector: only(production, 'Deployment')['spec'].selector, minAvailable: 2 });
  });

  it('admit traffic only to the HTTP and metrics ports, from the listed peers, and restrict egress when asked', () => {
    const policy = only(production, 'NetworkPolicy');
    expect(policy['spec'].podSelector).to.deep.equal(only(production, 'Deployment')['spec'].selector);
    expect(policy['spec'].policyTypes).to.deep.equal(['Ingress', 'Egress']);
    expect(policy['spec'].ingress.map((rule: Manifest) => rule['ports'])).to.deep.equal([[{ port: 'http', protocol: 'TCP' }], [{ port: 'metrics', protocol: 'TCP' }]]);
    // No networkPolicy.metricsFrom: the scraper is among the API's peers (namespace monitoring).
    for (const rule of policy['spec'].ingress as Manifest[]) {
      expect(rule['from'].map((peer: Manifest) => peer['namespaceSelector'].matchLabels['kubernetes.io/metadata.name'])).to.deep.equal(['shop', 'monitoring']);
    }
    // DNS and HTTPS as the values ask, then the GKE metadata server, since Workload Identity is on.
    expect(policy['spec'].egress).to.have.length(4);
    expect(policy['spec'].egress.slice(2)).to.deep.equal([
      { to: [{ ipBlock: { cidr: '169.254.169.254/32' } }], ports: [{ port: 80, protocol: 'TCP' }] },
      { to: [{ ipBlock: { cidr: '169.254.169.252/32' } }], ports: [{ port: 988, protocol: 'TCP' }] },
    ]);
  });

  it('open no way to the metadata server without Workload Identity', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/existing-secret-values.yaml'], set: { networkPolicy: { enabled: true, egress: [{ ports: [{ port: 443, protocol: 'TCP' }] }] } } });
    expect(JSON.stringify(only(manifests, 'NetworkPolicy')['spec'].egress)).to.not.contain('169.254');
  });

  it('admit every source on the HTTP and metrics ports only, and leave egress open, by default', async () => {
    const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'networkPolicy.enabled': true } });
    const policy = only(manifests, 'NetworkPolicy');
    expect(policy['spec'].policyTypes).to.deep.equal(['Ingress']);
    expect(policy['spec'].ingress).to.deep.equal([{ ports: [{ port: 'http', protocol: 'TCP' }] }, { ports: [{ port: 'metrics', protocol: 'TCP' }] }]);
    expect(policy['spec']).to.not.have.property('egress');
  });

  it('scrape /metrics on the metrics port with a ServiceMonitor', () => {
    const monitor = only(production, 'ServiceMonitor');
    expect(monitor['apiVersion']).to.equal('monitoring.coreos.com/v1');
    expect(monitor['metadata'].labels).to.include({ release: 'prometheus' });
    expect(monitor['spec'].selector.matchLabels).to.deep.equal(only(production, 'Service')['spec'].selector);
    expect(monitor['spec'].endpoints).to.deep.equal([{ port: 'metrics', path: '/metrics', interval: '15s', scrapeTimeout: '10s' }]);
  });
});
