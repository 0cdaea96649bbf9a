import { readFileSync } from 'node:fs';
import { type IncomingHttpHeaders, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { expect } from 'chai';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.ts';
import { tracingRequested } from '../../src/telemetry/tracing.ts';
import { tempDirectory } from '../support/access-files.ts';
import { CHART_DIR, ciValuesFiles, container, environment, helmBinary, type Manifest, notes, only, render, serviceConfigMap } from '../support/helm.ts';
import { cleanEnv, runService } from '../support/service-process.ts';

const OBSERVABILITY = 'ci/observability-values.yaml';

function portNames(ports: readonly Manifest[] | undefined): string[] {
  return (ports ?? []).map((port) => port['name'] as string);
}

/** The pod a test pretends the Deployment made: what the downward API and the Secrets would give. */
const POD = { name: 'kvcrud-7d9f8-x2x4q', namespace: 'apps' };

/**
 * The container's environment as the kubelet would give it: the ConfigMap (envFrom), then each
 * env entry in order, with fieldRef and secretKeyRef resolved and $(VAR) references to earlier
 * entries expanded.
 */
function podEnvironment(manifests: readonly Manifest[], secrets: Readonly<Record<string, string>>): Record<string, string> {
  const env: Record<string, string> = { ...(serviceConfigMap(manifests)['data'] as Record<string, string>) };
  for (const entry of (container(manifests)['env'] ?? []) as Manifest[]) {
    const from = entry['valueFrom'] as Manifest | undefined;
    let value: string;
    if (from?.['fieldRef']) {
      value = { 'metadata.name': POD.name, 'metadata.namespace': POD.namespace }[from['fieldRef'].fieldPath as string] ?? '';
    } else if (from?.['secretKeyRef']) {
      value = secrets[`${from['secretKeyRef'].name}/${from['secretKeyRef'].key}`] ?? '';
    } else {
      value = String(entry['value']).replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (reference, name: string) => env[name] ?? reference);
    }
    env[entry['name'] as string] = value;
  }
  return env;
}

interface Export {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A stand-in OpenTelemetry collector that keeps each OTLP/JSON export with its headers. */
async function collector(): Promise<{ endpoint: string; exports: Export[]; close: () => Promise<void> }> {
  const exports: Export[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      exports.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('the Helm chart observability values', function () {
  this.timeout(60_000);
  let helm: string;

  before(async function () {
    helm = await helmBinary(this);
  });

  describe('metrics', () => {
    it('are served on a port of their own by default: METRICS_PORT, and container and Service ports named metrics', async () => {
      const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'] });
      expect(serviceConfigMap(manifests)['data']).to.include({ LOG_LEVEL: 'info', METRICS_PORT: '9090', PORT: '8080' });
      expect(container(manifests)['ports']).to.deep.equal([
        { name: 'http', containerPort: 8080, protocol: 'TCP' },
        { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
      ]);
      expect(only(manifests, 'Service')['spec'].ports).to.deep.include({ name: 'metrics', port: 9090, targetPort: 'metrics', protocol: 'TCP' });
      expect(loadConfig(environment(manifests))).to.deep.include({ port: 8080, metricsPort: 9090, logLevel: 'info' });
    });

    it('follow metrics.port and logLevel', async () => {
      const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'metrics.port': 9464, logLevel: 'debug' } });
      expect(serviceConfigMap(manifests)['data']).to.include({ LOG_LEVEL: 'debug', METRICS_PORT: '9464' });
      expect(container(manifests)['ports']).to.deep.include({ name: 'metrics', containerPort: 9464, protocol: 'TCP' });
      expect(loadConfig(environment(manifests))).to.deep.include({ metricsPort: 9464, logLevel: 'debug' });
    });

    for (const port of [null, 0]) {
      it(`are served on the http port with metrics.port ${String(port)}, and scraped there`, async () => {
        const manifests = await render(helm, {
          valuesFiles: ['ci/default-values.yaml'],
          // Without authentication: on the http port /metrics needs a credential otherwise.
          set: { 'metrics.port': port, 'auth.mode': 'none', 'serviceMonitor.enabled': true, 'podMonitoring.enabled': true, 'networkPolicy.enabled': true },
        });
        expect(serviceConfigMap(manifests)['data']).to.not.have.property('METRICS_PORT');
        expect(loadConfig(environment(manifests))).to.not.have.property('metricsPort');
        expect(portNames(container(manifests)['ports'])).to.deep.equal(['http']);
        expect(portNames(only(manifests, 'Service')['spec'].ports)).to.deep.equal(['http']);
        expect(only(manifests, 'ServiceMonitor')['spec'].endpoints[0]).to.include({ port: 'http', path: '/metrics' });
        expect(only(manifests, 'PodMonitoring')['spec'].endpoints[0]).to.include({ port: 'http', path: '/metrics' });
        expect(only(manifests, 'NetworkPolicy')['spec'].ingress).to.deep.equal([{ ports: [{ port: 'http', protocol: 'TCP' }] }]);
      });
    }

    it('are scraped by a ServiceMonitor through the Service and a PodMonitoring from the pods, on the metrics port', async () => {
      const manifests = await render(helm, { valuesFiles: [OBSERVABILITY], set: { 'serviceMonitor.enabled': true }, release: 'shop' });
      const deployment = only(manifests, 'Deployment');
      const service = only(manifests, 'Service');

      const monitor = only(manifests, 'ServiceMonitor');
      expect(monitor['spec'].selector.matchLabels).to.deep.equal(service['spec'].selector);
      expect(service['metadata'].labels).to.include(monitor['spec'].selector.matchLabels);
      expect(monitor['spec'].endpoints).to.deep.equal([{ port: 'metrics', path: '/metrics', interval: '30s', scrapeTimeout: '10s' }]);
      expect(service['spec'].ports).to.deep.include({ name: 'metrics', port: 9464, targetPort: 'metrics', protocol: 'TCP' });

      const podMonitoring = only(manifests, 'PodMonitoring');
      expect(podMonitoring['apiVersion']).to.equal('monitoring.googleapis.com/v1');
      expect(podMonitoring['metadata'].name).to.equal('shop-kvcrud');
      expect(podMonitoring['spec'].selector).to.deep.equal({ matchLabels: deployment['spec'].selector.matchLabels });
      expect(deployment['spec'].template.metadata.labels).to.include(podMonitoring['spec'].selector.matchLabels);
      expect(podMonitoring['spec'].endpoints).to.deep.equal([{ port: 'metrics', path: '/metrics', interval: '15s', timeout: '5s' }]);
      expect(container(manifests)['ports']).to.deep.include({ name: 'metrics', containerPort: 9464, protocol: 'TCP' });
      expect(environment(manifests)['METRICS_PORT']).to.equal('9464');
    });

    it('reach the scraper through the NetworkPolicy: the metrics port from metricsFrom, the API from ingressFrom', async () => {
      const policy = only(await render(helm, { valuesFiles: [OBSERVABILITY] }), 'NetworkPolicy');
      const namespaces = (rule: Manifest) => (rule['from'] as Manifest[]).map((peer) => peer['namespaceSelector'].matchLabels['kubernetes.io/metadata.name'] as string);
      expect(policy['spec'].ingress.map((rule: Manifest) => [rule['ports'], namespaces(rule)])).to.deep.equal([
        [[{ port: 'http', protocol: 'TCP' }], ['shop']],
        [[{ port: 'metrics', protocol: 'TCP' }], ['gmp-system']],
      ]);
    });
  });

  describe('tracing', () => {
    it('is off without tracing.otlpEndpoint: no OTEL variable at all', async () => {
      for (const valuesFile of ciValuesFiles()) {
        const values = parse(readFileSync(`${CHART_DIR}${valuesFile}`, 'utf8')) as { tracing?: { otlpEndpoint?: string } };
        const env = environment(await render(helm, { valuesFiles: [valuesFile] }));
        const on = Boolean(values.tracing?.otlpEndpoint);
        expect(tracingRequested(env), valuesFile).to.equal(on);
        if (!on) expect(Object.keys(env).filter((name) => name.startsWith('OTEL_') && name !== 'OTEL_SERVICE_NAME'), valuesFile).to.deep.equal([]);
      }
    });

    it('sets the OTEL variables in the container env, not the ConfigMap: headers from the Secret, pod and namespace from the downward API', async () => {
      const manifests = await render(helm, { valuesFiles: [OBSERVABILITY] });
      expect(Object.keys(serviceConfigMap(manifests)['data'] as object).filter((name) => name.startsWith('OTEL_'))).to.deep.equal([]);
      expect(container(manifests)['env']).to.deep.equal([
        { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
        { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: 'http://otel-collector.observability.svc:4318' },
        { name: 'OTEL_EXPORTER_OTLP_PROTOCOL', value: 'http/protobuf' },
        { name: 'OTEL_EXPORTER_OTLP_HEADERS', valueFrom: { secretKeyRef: { name: 'otel-collector-auth', key: 'headers' } } },
        { name: 'OTEL_TRACES_SAMPLER', value: 'parentbased_traceidratio' },
        { name: 'OTEL_TRACES_SAMPLER_ARG', value: '0.1' },
        { name: 'OTEL_SERVICE_NAME', value: 'orders-gateway' },
        {
          name: 'OTEL_RESOURCE_ATTRIBUTES',
          value: 'k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),k8s.deployment.name=kvcrud,k8s.container.name=kvcrud,deployment.environment.name=prod',
        },
      ]);
      expect(tracingRequested(environment(manifests))).to.equal(true);
      expect(loadConfig(environment(manifests))).to.deep.include({ logLevel: 'warn', metricsPort: 9464 });
    });

    it('names the service after the release unless tracing.serviceName is set, with only what is set', async () => {
      const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'tracing.otlpEndpoint': 'https://otlp.example.com' }, release: 'shop' });
      const env = podEnvironment(manifests, {});
      expect(env).to.include({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otlp.example.com',
        OTEL_SERVICE_NAME: 'shop-kvcrud',
        OTEL_RESOURCE_ATTRIBUTES: `k8s.pod.name=${POD.name},k8s.namespace.name=${POD.namespace},k8s.deployment.name=shop-kvcrud,k8s.container.name=kvcrud`,
      });
      for (const unset of ['OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG']) {
        expect(env, unset).to.not.have.property(unset);
      }
    });

    it('lets extraEnv override an OTEL variable the chart sets', async () => {
      const manifests = await render(helm, { valuesFiles: [OBSERVABILITY], set: { extraEnv: [{ name: 'OTEL_SERVICE_NAME', value: 'other' }] } });
      expect(podEnvironment(manifests, {})['OTEL_SERVICE_NAME']).to.equal('other');
    });

    it('opens egress to the endpoint port when egress is restricted: to tracingTo, or anywhere', async () => {
      const restricted = { 'networkPolicy.enabled': true, 'networkPolicy.egress': [{ ports: [{ port: 53, protocol: 'UDP' }] }] };
      const policy = only(await render(helm, { valuesFiles: [OBSERVABILITY] }), 'NetworkPolicy');
      expect(policy['spec'].egress).to.deep.include({
        ports: [{ port: 4318, protocol: 'TCP' }],
        to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'observability' } } }],
      });
      for (const [endpoint, port] of [
        ['http://collector:4317', 4317],
        ['https://otlp.example.com/otlp', 443],
        ['http://collector.observability', 80],
        ['http://[fd00::1]:4318', 4318],
      ] as const) {
        const manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { ...restricted, 'tracing.otlpEndpoint': endpoint } });
        expect(only(manifests, 'NetworkPolicy')['spec'].egress.at(-1), endpoint).to.deep.equal({ ports: [{ port, protocol: 'TCP' }] });
      }
      // Egress left open: nothing to add.
      const open = only(await render(helm, { valuesFiles: [OBSERVABILITY], set: { 'networkPolicy.egress': [] } }), 'NetworkPolicy');
      expect(open['spec']).to.not.have.property('egress');
      expect(open['spec'].policyTypes).to.deep.equal(['Ingress']);
    });

    it('exports, from the service run with the rendered environment, spans carrying the pod and the Secret headers', async () => {
      const receiver = await collector();
      const dir = tempDirectory();
      try {
        const manifests = await render(helm, {
          set: {
            dataStore: 'embedded',
            'auth.mode': 'none',
            tracing: {
              otlpEndpoint: 'http://otel-collector.observability.svc:4318',
              protocol: 'http/json',
              sampler: 'parentbased_traceidratio',
              samplerArg: 1,
              resourceAttributes: { 'deployment.environment.name': 'test' },
              headersSecret: { existingSecret: 'otel-auth' },
            },
          },
        });
        const env = podEnvironment(manifests, { 'otel-auth/headers': 'x-api-key=collector-key-1' });
        // Only the addresses change: free ports, a temporary directory, and the stand-in collector.
        const service = await runService(
          cleanEnv({ ...env, PORT: '0', METRICS_PORT: '0', DATA_DIR: join(dir.path, 'data'), OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY: '100' }),
        );
        try {
          expect((await fetch(`${service.baseUrl}/v1/local/readCellData?tableName=t&id=r`)).status).to.equal(404);
          const deadline = Date.now() + 10_000;
          while (receiver.exports.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
          const [first] = receiver.exports;
          expect(first, 'an export within 10 s').to.not.equal(undefined);
          expect(first?.headers['x-api-key']).to.equal('collector-key-1');
          const resource = (JSON.parse(first?.body ?? '{}') as { resourceSpans: Array<{ resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> } }> })
            .resourceSpans[0]?.resource.attributes;
          const attributes = Object.fromEntries((resource ?? []).map((attribute) => [attribute.key, attribute.value.stringValue]));
          expect(attributes).to.include({
            'service.name': 'kvcrud',
            'k8s.pod.name': POD.name,
            'k8s.namespace.name': POD.namespace,
            'k8s.deployment.name': 'kvcrud',
            'k8s.container.name': 'kvcrud',
            'deployment.environment.name': 'test',
          });
        } finally {
          expect(await service.stop()).to.equal(0);
        }
      } finally {
        await receiver.close();
        dir.remove();
      }
    });
  });

  describe('NOTES.txt', () => {
    it('says where the metrics are served and scraped and where the traces go', async () => {
      const text = await notes(helm, { valuesFiles: [OBSERVABILITY] });
      expect(text).to.contain('Metrics: GET /metrics on port 9464 (named metrics on the pods and the Service, apart from the API), scraped by the PodMonitoring kvcrud');
      expect(text).to.contain('Traces: exported over OTLP to http://otel-collector.observability.svc:4318 as service.name orders-gateway, with the headers of the Secret otel-collector-auth.');
      expect(text).to.contain('at level warn and above');
    });

    it('says when nothing scrapes the metrics and tracing is off', async () => {
      const text = await notes(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'metrics.port': null } });
      expect(text).to.contain("Metrics: GET /metrics on the http port, beside the API (metrics.port is null), with a credential like the API's; nothing scrapes it yet");
      expect(text).to.contain('Traces: off (set tracing.otlpEndpoint to export them).');
    });
  });
});
