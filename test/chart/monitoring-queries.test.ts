import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { expect } from 'chai';
import { stringify } from 'yaml';
import { keysFile, newApiKey } from '../support/access-files.ts';
import { TEST_PROJECT, emulatorHost } from '../support/emulator.ts';
import { helmBinary, render } from '../support/helm.ts';
import { type Dashboard, MONITORING_VALUES, type Query, alertRules, asPromql, dashboard, dashboardQueries, variableQuery } from '../support/monitoring.ts';
import { parseSamples } from '../support/prometheus.ts';
import { promtoolBinary, runPromtool } from '../support/promtool.ts';
import { type ServiceProcess, cleanEnv, runService } from '../support/service-process.ts';
import { randomInstanceId } from '../support/test-app.ts';

/**
 * The metrics from outside kvcrud that the rules and the dashboard may name, each with the labels
 * it has. Nothing else is allowed: every other name must be one the service exposes.
 */
const EXTERNAL_METRICS: Readonly<Record<string, readonly string[]>> = {
  // kube-state-metrics: how many times each container of each pod restarted (KvcrudPodRestarting).
  kube_pod_container_status_restarts_total: ['namespace', 'pod', 'container', 'uid'],
};

/**
 * Labels the scrape gives every series (Prometheus' target labels, from the ServiceMonitor or the
 * PodMonitoring), which the service itself does not expose.
 */
const TARGET_LABELS: ReadonlySet<string> = new Set(['namespace', 'job', 'instance', 'pod', 'container', 'service', 'endpoint']);

/** What an expression names: each selector's metric with the labels it matches on, and every label it groups or matches by. */
interface Names {
  readonly selectors: Array<{ metric: string; labels: string[] }>;
  readonly labels: string[];
}

/** The metric and label names of a PromQL expression, read from its syntax tree (@prometheus-io/lezer-promql, Prometheus' own grammar). */
function namesIn(expr: string): Names {
  const tree = parser.parse(expr);
  const selectors: Names['selectors'] = [];
  const labels: string[] = [];
  const text = (node: { from: number; to: number }) => expr.slice(node.from, node.to);
  tree.iterate({
    enter: (ref) => {
      if (ref.type.isError) throw new Error(`not PromQL at ${ref.from}: ${expr}`);
      if (ref.name === 'LabelName' && text(ref.node) !== '__name__') labels.push(text(ref.node));
      if (ref.name !== 'VectorSelector') return;
      const identifier = ref.node.getChild('Identifier');
      const matchers = ref.node.getChild('LabelMatchers');
      const metric = identifier === null ? undefined : text(identifier);
      if (metric === undefined) throw new Error(`a selector without a metric name: ${text(ref.node)}`);
      const matched = matchers === null ? [] : matchers.getChildren('UnquotedLabelMatcher').map((matcher) => text(matcher.getChild('LabelName') ?? matcher));
      selectors.push({ metric, labels: matched });
    },
  });
  return { selectors, labels };
}

/** The metric names a scrape exposes (a histogram's _bucket, _sum and _count), each with the labels its samples carry. */
function exposed(scrape: string): Map<string, Set<string>> {
  const names = new Map<string, Set<string>>();
  for (const [, name = '', type = ''] of scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const suffixes = type === 'histogram' ? ['_bucket', '_sum', '_count'] : type === 'summary' ? ['', '_sum', '_count'] : [''];
    for (const suffix of suffixes) names.set(`${name}${suffix}`, new Set());
  }
  for (const sample of parseSamples(scrape)) {
    for (const label of Object.keys(sample.labels)) names.get(sample.name)?.add(label);
  }
  return names;
}

/**
 * A request through the API as the caller of `key`, sent again (up to 5 times, a second apart)
 * while that caller's rate limit (one a second) answers 429.
 */
async function callAs(key: string, method: string, url: string, body?: unknown): Promise<Response> {
  for (let attempt = 0; ; attempt += 1) {
    const init: RequestInit = { method, headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) } };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await fetch(url, init);
    if (response.status !== 429 || attempt === 5) return response;
    await response.body?.cancel();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}

/**
 * Through the v2 API as one caller: creates a table, opens a change feed on it (a long poll from
 * now), writes a row and polls the feed again for that change. The feed metrics then have samples
 * for the store: a feed opened and ended (by its reader, CLIENT_GONE), a change delivered and its lag.
 */
async function followOneChange(baseUrl: string, key: string): Promise<void> {
  const tables = `${baseUrl}/v2/stores/embedded/instances/local/tables`;
  const call = (method: string, url: string, body?: unknown) => callAs(key, method, url, body);
  const created = await call('POST', tables, { name: 'followed', families: [{ name: 'cf' }] });
  expect(created.status, await created.text()).to.equal(201);
  const started = await call('GET', `${tables}/followed/changes?wait=0`);
  expect(started.status).to.equal(200);
  const { cursor } = (await started.json()) as { cursor: string };
  const written = await call('POST', `${tables}/followed/rows/k1:mutate`, { mutations: [{ set: { family: 'cf', column: 'c', value: 'v' } }] });
  expect(written.status, await written.text()).to.equal(200);
  const polled = await call('GET', `${tables}/followed/changes?wait=10&cursor=${encodeURIComponent(cursor)}`);
  expect(polled.status).to.equal(200);
  expect(((await polled.json()) as { changes: unknown[] }).changes).to.have.length(1);
}

/**
 * Through the v2 API as one caller, on a store that coalesces single-row calls (Bigtable): creates
 * a table, writes a row and reads it. Each of those calls goes out through the store's batches
 * (alone: a batch of one), so the batch-size histogram has samples for mutateRow and readRows.
 */
async function writeAndReadOneRow(baseUrl: string, key: string, store: string, instance: string): Promise<void> {
  const tables = `${baseUrl}/v2/stores/${store}/instances/${instance}/tables`;
  const call = (method: string, url: string, body?: unknown) => callAs(key, method, url, body);
  const created = await call('POST', tables, { name: 'coalesced', families: [{ name: 'cf' }] });
  expect(created.status, await created.text()).to.equal(201);
  const written = await call('POST', `${tables}/coalesced/rows/k1:mutate`, { mutations: [{ set: { family: 'cf', column: 'c', value: 'v' } }] });
  expect(written.status, await written.text()).to.equal(200);
  const read = await call('GET', `${tables}/coalesced/rows/k1`);
  expect(read.status, await read.text()).to.equal(200);
}

describe('the queries of the Helm chart dashboard and alerts', function () {
  this.timeout(60_000);
  let queries: Query[];
  let board: Dashboard;

  before(async function () {
    const helm = await helmBinary(this);
    const manifests = await render(helm, { valuesFiles: [MONITORING_VALUES], release: 'shop' });
    board = dashboard(manifests);
    queries = [
      ...alertRules(manifests).map((rule) => ({ where: `alert ${rule.alert}`, expr: rule.expr })),
      ...dashboardQueries(board).map((query) => ({ ...query, expr: asPromql(query.expr) })),
    ];
    expect(queries).to.have.length.above(20);
  });

  it('all parse as PromQL (promtool check rules, each one as a recording rule)', async function () {
    const promtool = await promtoolBinary(this);
    const directory = mkdtempSync(join(tmpdir(), 'kvcrud-queries-'));
    try {
      const rules = queries.map((query, index) => ({ record: `kvcrud:query:${index}`, expr: query.expr }));
      writeFileSync(join(directory, 'queries.yaml'), stringify({ groups: [{ name: 'queries', rules }] }));
      const result = await runPromtool(promtool, ['check', 'rules', 'queries.yaml'], directory);
      const listing = queries.map((query, index) => `kvcrud:query:${index} is ${query.where}`).join('\n');
      expect(result.code, `${result.stdout}${result.stderr}\n${listing}`).to.equal(0);
      expect(result.stdout).to.contain(`SUCCESS: ${queries.length} rules found`);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  describe('against a running service', () => {
    let service: ServiceProcess | undefined;
    let metrics: Map<string, Set<string>>;
    const directory = mkdtempSync(join(tmpdir(), 'kvcrud-metrics-'));

    before(async function () {
      // API keys (so the access-file metrics exist), a rate limit of one request a second (so a
      // request is shed), a change feed that delivers a change and ends, and a row written and
      // read on a store that coalesces (Bigtable, on the emulator): histograms and labelled
      // counters have samples only once observed, so every kvcrud metric then has samples, and
      // its labels can be read off them.
      const host = emulatorHost(this);
      const instance = randomInstanceId();
      const key = newApiKey();
      const feedKey = newApiKey();
      const rowKey = newApiKey();
      writeFileSync(
        join(directory, 'keys.json'),
        keysFile([
          { name: 'operator', key, role: 'admin', instances: ['*'] },
          { name: 'follower', key: feedKey, role: 'admin', instances: ['*'] },
          { name: 'writer', key: rowKey, role: 'admin', instances: ['*'] },
        ]),
      );
      writeFileSync(
        join(directory, 'stores.yaml'),
        [
          'default: embedded',
          'stores:',
          `  embedded: { driver: embedded, dataDir: ${join(directory, 'embedded')}, instances: [local] }`,
          `  bigtable: { driver: bigtable, projectId: ${TEST_PROJECT}, emulatorHost: "${host}", instances: [${instance}] }`,
        ].join('\n'),
      );
      service = await runService(
        cleanEnv({
          PORT: '0',
          STORES_FILE: join(directory, 'stores.yaml'),
          AUTH_MODE: 'apikey',
          AUTH_API_KEYS_FILE: join(directory, 'keys.json'),
          RATE_LIMIT_PER_SECOND: '1',
        }),
      );
      const get = (path: string) => fetch(`${service?.baseUrl}${path}`, { headers: { 'x-api-key': key } });
      expect((await get('/readyz')).status).to.equal(200);
      const statuses = [];
      for (let attempt = 0; attempt < 3; attempt += 1) statuses.push((await get('/v1/local/readCellData?tableName=orders&id=a')).status);
      expect(statuses).to.include.members([404, 429]);
      await followOneChange(service.baseUrl, feedKey);
      await writeAndReadOneRow(service.baseUrl, rowKey, 'bigtable', instance);
      const scrape = await get('/metrics');
      expect(scrape.status).to.equal(200);
      metrics = exposed(await scrape.text());
    });

    after(async () => {
      await service?.stop();
      rmSync(directory, { recursive: true, force: true });
    });

    it('name only metrics it exposes (or the allowed ones from outside kvcrud), and only labels they have', () => {
      for (const { where, expr } of queries) {
        const { selectors, labels } = namesIn(expr);
        expect(selectors, where).to.not.deep.equal([]);
        const known = new Set(TARGET_LABELS);
        for (const { metric, labels: matched } of selectors) {
          const own = metrics.get(metric) ?? new Set(EXTERNAL_METRICS[metric]);
          expect(metrics.has(metric) || metric in EXTERNAL_METRICS, `${where}: the service exposes no metric ${metric}`).to.equal(true);
          for (const label of matched) expect(TARGET_LABELS.has(label) || own.has(label), `${where}: ${metric} has no label ${label}`).to.equal(true);
          for (const label of own) known.add(label);
        }
        // Grouping and matching labels (by, on, ignoring) must be on one of the metrics it reads.
        for (const label of labels) expect(known.has(label), `${where}: no metric it reads has the label ${label}`).to.equal(true);
      }
    });

    it("name, in each variable, a label that the variable's metric has", () => {
      for (const variable of board.templating.list.filter((candidate) => candidate.type === 'query')) {
        const query = variableQuery(variable);
        const [selector] = namesIn(asPromql(query?.selector ?? '')).selectors;
        const own = metrics.get(selector?.metric ?? '') ?? new Set();
        expect(TARGET_LABELS.has(query?.label ?? '') || own.has(query?.label ?? ''), `variable ${variable.name}: ${query?.label}`).to.equal(true);
      }
    });
  });
});
