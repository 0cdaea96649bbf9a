import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { helmBinary, type Manifest, only, render, template } from '../support/helm.ts';
import { MONITORING_VALUES, type Dashboard, dashboard, dashboardQueries, panels, variablesUsed } from '../support/monitoring.ts';

const OBSERVABILITY_DOC = readFileSync(new URL('../../docs/observability.md', import.meta.url), 'utf8');

/** The panels an operator looks for first, by title. */
const EXPECTED_PANELS = [
  'Request rate by store',
  '5xx ratio by store',
  'Request rate by route',
  '5xx ratio by route',
  'Latency percentiles',
  'p99 latency by route',
  'In-flight requests',
  'Shed requests by limit',
  'Store call p99 latency by store and operation',
  'Store call errors by store and code',
  'Callers per coalesced store call',
  'Event-loop lag',
  'Heap and RSS',
  'Open feeds',
  'Changes delivered/s',
  'Feed lag p50 and p99',
  'Feeds ended by reason',
];

/** Grafana's own variables that the queries may use. */
const GRAFANA_VARIABLES = new Set(['__rate_interval', '__interval', '__range']);

/** The rows of the docs' panel table: title -> the queries in its cell. */
function documentedPanels(): Map<string, string[]> {
  const start = OBSERVABILITY_DOC.indexOf('## The Grafana dashboard');
  const section = OBSERVABILITY_DOC.slice(start, OBSERVABILITY_DOC.indexOf('\n## ', start + 1));
  return new Map(
    [...section.matchAll(/^\| (?!panel \|)([^|]+) \| ((?:[^|\\]|\\\|)+) \|/gm)].map(([, title = '', cell = '']) => [
      title.trim(),
      cell
        .split('<br>')
        .map((query) => query.trim().replace(/^`|`$/g, '').replaceAll('\\|', '|')),
    ]),
  );
}

describe('the Helm chart Grafana dashboard', function () {
  this.timeout(60_000);
  let helm: string;
  let manifests: Manifest[];
  let board: Dashboard;

  before(async function () {
    helm = await helmBinary(this);
    manifests = await render(helm, { valuesFiles: [MONITORING_VALUES], release: 'shop' });
    board = dashboard(manifests);
  });

  it('is a ConfigMap with the label the Grafana sidecar watches, and the annotations asked for', async () => {
    const configMap = only(manifests, 'ConfigMap', 'shop-kvcrud-dashboard');
    expect(configMap['metadata'].labels).to.include({ grafana_dashboard: '1', 'app.kubernetes.io/instance': 'shop' });
    expect(configMap['metadata'].annotations).to.deep.equal({ grafana_folder: 'Databases' });
    expect(Object.keys(configMap['data'] as object)).to.deep.equal(['kvcrud.json']);
    // The file in the chart, as it is.
    expect(configMap['data']['kvcrud.json']).to.equal(readFileSync(new URL('../../charts/kvcrud/dashboards/kvcrud.json', import.meta.url), 'utf8').trimEnd());

    const relabelled = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'metrics.grafanaDashboard': { enabled: true, label: 'dashboards.example.com/grafana', labelValue: 'kvcrud' } } });
    expect(only(relabelled, 'ConfigMap', 'kvcrud-dashboard')['metadata'].labels).to.include({ 'dashboards.example.com/grafana': 'kvcrud' });
    expect(only(relabelled, 'ConfigMap', 'kvcrud-dashboard')['metadata']).to.not.have.property('annotations');
  });

  it('checks its values with values.schema.json', async () => {
    const result = await template(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'metrics.grafanaDashboard': { enabled: 'yes', label: 'grafana dashboard', labelValue: 'yes please', folder: 'Databases' } } });
    expect(result.code).to.not.equal(0);
    expect(result.stderr).to.contain("values don't meet the specifications of the schema");
    for (const path of ['/metrics/grafanaDashboard/enabled', '/metrics/grafanaDashboard/label', '/metrics/grafanaDashboard/labelValue']) expect(result.stderr, path).to.contain(`at '${path}'`);
    expect(result.stderr).to.match(/additional properties 'folder' not allowed/);
  });

  it('has the panels an operator looks for', () => {
    expect(panels(board).map((panel) => panel.title)).to.include.members(EXPECTED_PANELS);
  });

  it('asks for the data source, and every panel and variable queries the one chosen', () => {
    const [datasource] = board.templating.list;
    expect(datasource).to.deep.include({ name: 'datasource', type: 'datasource', query: 'prometheus' });
    const chosen = { type: 'prometheus', uid: '${datasource}' };
    for (const panel of panels(board)) {
      expect(panel.datasource, panel.title).to.deep.equal(chosen);
      expect(panel.targets, panel.title).to.have.length.above(0);
      for (const target of panel.targets ?? []) expect((target as { datasource?: unknown }).datasource, `${panel.title} ${target.refId}`).to.deep.equal(chosen);
    }
    for (const variable of board.templating.list.slice(1)) expect((variable as { datasource?: unknown }).datasource, variable.name).to.deep.equal(chosen);
  });

  it('picks the release, its stores and its instances with variables, every store and instance by default', () => {
    const variables = new Map(board.templating.list.map((variable) => [variable.name, variable]));
    expect([...variables.keys()]).to.deep.equal(['datasource', 'namespace', 'job', 'store', 'instance']);
    for (const name of ['store', 'instance']) expect(variables.get(name), name).to.deep.include({ includeAll: true, multi: true, allValue: '.*' });
    for (const { where, expr } of dashboardQueries(board)) {
      for (const name of variablesUsed(expr)) expect(variables.has(name) || GRAFANA_VARIABLES.has(name), `${where}: $${name}`).to.equal(true);
    }
  });

  it('filters every panel query by the chosen release and instances, and by the chosen stores where there are stores', () => {
    for (const { where, expr } of dashboardQueries(board).filter((query) => query.where.startsWith('panel'))) {
      for (const [, name = '', matchers = ''] of expr.matchAll(/([a-z_:]+)\{([^}]*)\}/g)) {
        expect(matchers, `${where}: ${name}`).to.match(/^namespace=~"\$namespace", job=~"\$job", instance=~"\$instance"/);
        if (/^kvcrud_(http_request_duration_seconds|store_operation_duration_seconds|store_batch_size)_/.test(name)) expect(matchers, `${where}: ${name}`).to.contain('store=~"$store"');
      }
    }
  });

  it('lays the panels out without overlap, within 24 columns', () => {
    const cells = new Set<string>();
    for (const panel of board.panels) {
      const { x, y, w, h } = panel.gridPos;
      expect(x + w, panel.title).to.be.at.most(24);
      for (let row = y; row < y + h; row += 1) {
        for (let column = x; column < x + w; column += 1) {
          expect(cells.has(`${row},${column}`), `${panel.title} overlaps at ${row},${column}`).to.equal(false);
          cells.add(`${row},${column}`);
        }
      }
    }
  });

  it('is shown in docs/observability.md: every panel with its queries', () => {
    const documented = documentedPanels();
    // The docs write the selectors' common start as "…".
    const common = 'namespace=~"$namespace", job=~"$job", instance=~"$instance"';
    const shown = panels(board).map(
      (panel) => [panel.title, (panel.targets ?? []).map((target) => target.expr.replace(/\s*\n\s*/g, ' ').replaceAll(`{${common}, `, '{…, ').replaceAll(`{${common}}`, '{…}'))] as const,
    );
    expect([...documented.keys()]).to.deep.equal(shown.map(([title]) => title));
    for (const [title, queries] of shown) expect(documented.get(title), title).to.deep.equal(queries);
  });
});
