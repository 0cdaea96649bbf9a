import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parse, stringify } from 'yaml';
import { helmBinary, type Manifest, only, render, template } from '../support/helm.ts';
import { MONITORING_VALUES, alertRules, ruleGroups } from '../support/monitoring.ts';
import { promtoolBinary, runPromtool } from '../support/promtool.ts';

/** The alerts' unit tests; they name the rule file the chart's rules are rendered into. */
const UNIT_TESTS = new URL('alerts/kvcrud-alerts.test.yaml', import.meta.url).pathname;
const RULES_FILE = 'kvcrud-alerts.rules.yaml';
const OPERATIONS_DOC = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
const OBSERVABILITY_DOC = readFileSync(new URL('../../docs/observability.md', import.meta.url), 'utf8');

interface UnitTests {
  rule_files: string[];
  tests: Array<{ name: string; alert_rule_test?: Array<{ alertname: string; exp_alerts: unknown[] }> }>;
}

/** The anchors GitHub gives the headings of a Markdown document. */
function headingAnchors(markdown: string): Set<string> {
  return new Set(
    [...markdown.matchAll(/^#{1,6} (.+)$/gm)].map(([, heading = '']) =>
      heading
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    ),
  );
}

describe('the Helm chart alerting rules', function () {
  this.timeout(60_000);
  let helm: string;
  let manifests: Manifest[];

  before(async function () {
    helm = await helmBinary(this);
    // As the unit tests expect them: the release kvcrud in namespace apps, default thresholds.
    manifests = await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'metrics.prometheusRule.enabled': true }, release: 'kvcrud', namespace: 'apps' });
  });

  describe('checked by promtool', () => {
    let promtool: string;
    let directory: string;

    before(async function () {
      promtool = await promtoolBinary(this);
      directory = mkdtempSync(join(tmpdir(), 'kvcrud-rules-'));
      writeFileSync(join(directory, RULES_FILE), stringify({ groups: ruleGroups(manifests) }));
      copyFileSync(UNIT_TESTS, join(directory, 'kvcrud-alerts.test.yaml'));
    });

    after(() => {
      if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
    });

    it('are valid rules (promtool check rules)', async () => {
      const result = await runPromtool(promtool, ['check', 'rules', RULES_FILE], directory);
      expect(result.code, result.stdout + result.stderr).to.equal(0);
      expect(result.stdout).to.contain(`SUCCESS: ${alertRules(manifests).length} rules found`);
    });

    it('pass their unit tests: series that fire each alert, and series that must not (promtool test rules)', async () => {
      const result = await runPromtool(promtool, ['test', 'rules', 'kvcrud-alerts.test.yaml'], directory);
      expect(result.code, result.stdout + result.stderr).to.equal(0);
      expect(result.stdout).to.contain('SUCCESS');
    });
  });

  it('each have a unit test in which they fire and one in which they stay silent', () => {
    const unitTests = parse(readFileSync(UNIT_TESTS, 'utf8')) as UnitTests;
    expect(unitTests.rule_files).to.deep.equal([RULES_FILE]);
    const cases = unitTests.tests.flatMap((test) => test.alert_rule_test ?? []);
    for (const { alert } of alertRules(manifests)) {
      const own = cases.filter((test) => test.alertname === alert);
      expect(own.some((test) => test.exp_alerts.length > 0), `${alert} fires in a test`).to.equal(true);
      expect(own.some((test) => test.exp_alerts.length === 0), `${alert} is silent in a test`).to.equal(true);
    }
    // And nothing tests an alert the chart does not have.
    expect(cases.map((test) => test.alertname).filter((name) => !alertRules(manifests).some((rule) => rule.alert === name))).to.deep.equal([]);
  });

  it('each link a runbook: a section of docs/operations.md named after the alert', () => {
    const anchors = headingAnchors(OPERATIONS_DOC);
    for (const rule of alertRules(manifests)) {
      const alert = rule.alert ?? '';
      expect(rule.annotations?.['runbook_url'], alert).to.equal(`docs/operations.md#${alert.toLowerCase()}`);
      expect(anchors, `docs/operations.md has a section ${alert}`).to.include(alert.toLowerCase());
      expect(rule.annotations?.['summary'], alert).to.be.a('string').and.not.equal('');
      expect(rule.annotations?.['description'], alert).to.be.a('string').and.not.equal('');
      expect(rule.labels?.['severity'], alert).to.be.oneOf(['critical', 'warning']);
      expect(OBSERVABILITY_DOC, `docs/observability.md lists ${alert}`).to.contain(`| [${alert}](operations.md#${alert.toLowerCase()}) |`);
    }
  });

  it('select only the release: its namespace and job, as its ServiceMonitor and PodMonitoring scrape it', async () => {
    const shop = await render(helm, { valuesFiles: [MONITORING_VALUES], release: 'shop', namespace: 'store-front' });
    const rule = only(shop, 'PrometheusRule');
    expect(rule['metadata'].labels).to.include({ release: 'prometheus' });
    for (const { alert, expr } of alertRules(shop)) {
      const selectors = [...expr.matchAll(/(kvcrud_[a-z_]+|nodejs_[a-z0-9_]+)\{([^}]*)\}/g)];
      if (alert === 'KvcrudPodRestarting') {
        expect(expr, alert).to.contain('namespace="store-front", container="kvcrud", pod=~`shop-kvcrud-[a-z0-9]+-[a-z0-9]+`');
      } else {
        expect(selectors, alert).to.not.deep.equal([]);
        for (const [selector, , matchers = ''] of selectors) expect(matchers, `${alert}: ${selector}`).to.match(/^namespace="store-front", job="shop-kvcrud"/);
      }
    }
    expect(only(shop, 'ServiceMonitor')['metadata'].name).to.equal('shop-kvcrud');
    expect(only(shop, 'Service')['metadata'].name).to.equal('shop-kvcrud');
  });

  it("take each alert's for, severity and thresholds from the values, and leave out the disabled ones", async () => {
    const alerts = {
      errorRatio: { for: '2m', severity: 'page', ratio: 0.05, minRequestsPerSecond: 3 },
      latency: { seconds: 2.5, minRequestsPerSecond: 1, ignoredRoutes: ['/v2/stores/:store/instances/:instance/tables/:table/rows'] },
      storeUnavailable: { enabled: false },
      shedding: { ratio: 0.2, minRequestsPerSecond: 4 },
      accessFileStale: { seconds: 900 },
      eventLoopLag: { seconds: 0.25 },
      podRestarts: { restarts: 3, window: '1h' },
      feedLag: { for: '15m', seconds: 120 },
    };
    const rules = alertRules(await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'metrics.prometheusRule': { enabled: true, alerts } }, namespace: 'apps' }));
    const byName = new Map(rules.map((rule) => [rule.alert, rule]));
    expect([...byName.keys()]).to.deep.equal(['KvcrudHighErrorRatio', 'KvcrudHighLatency', 'KvcrudRequestsShed', 'KvcrudAccessFileStale', 'KvcrudEventLoopLag', 'KvcrudPodRestarting', 'KvcrudFeedLag']);
    const errorRatio = byName.get('KvcrudHighErrorRatio');
    expect(errorRatio).to.deep.include({ for: '2m', labels: { severity: 'page' } });
    expect(errorRatio?.expr).to.contain(') > 0.05\nand\n').and.match(/\) > 3$/);
    // Route templates are quoted for the regular expression: ":" and "/" as they are.
    expect(byName.get('KvcrudHighLatency')?.expr)
      .to.contain('route!~`/v2/stores/:store/instances/:instance/tables/:table/rows`')
      .and.contain(' > 2.5\nand\n')
      .and.match(/\) > 1$/);
    expect(byName.get('KvcrudRequestsShed')?.expr).to.contain('\n> 0.2\n').and.match(/\) > 4$/);
    expect(byName.get('KvcrudAccessFileStale')?.expr).to.match(/ > 900$/);
    expect(byName.get('KvcrudEventLoopLag')?.expr).to.match(/ > 0.25$/);
    expect(byName.get('KvcrudPodRestarting')?.expr).to.match(/\[1h\]\) >= 3$/);
    expect(byName.get('KvcrudPodRestarting')?.annotations?.['description']).to.contain('in the last 1h');
    expect(byName.get('KvcrudFeedLag')).to.deep.include({ for: '15m', labels: { severity: 'warning' } });
    expect(byName.get('KvcrudFeedLag')?.expr).to.contain('kvcrud_feed_lag_seconds_bucket{').and.match(/ > 120$/);
  });

  it('check their values with values.schema.json', async () => {
    const result = await template(helm, {
      valuesFiles: ['ci/default-values.yaml'],
      set: {
        'metrics.prometheusRule': { enabled: 'yes', runbookBaseUrl: 'docs/operations.md#top', alerts: { errorRatio: { ratio: 2, for: '10 minutes' }, latency: { seconds: 0 }, podRestarts: { restarts: 0.5 }, feedLag: { seconds: -1 }, memory: {} } },
      },
    });
    expect(result.code).to.not.equal(0);
    expect(result.stderr).to.contain("values don't meet the specifications of the schema");
    for (const path of [
      '/metrics/prometheusRule/enabled',
      '/metrics/prometheusRule/runbookBaseUrl',
      '/metrics/prometheusRule/alerts/errorRatio/ratio',
      '/metrics/prometheusRule/alerts/errorRatio/for',
      '/metrics/prometheusRule/alerts/latency/seconds',
      '/metrics/prometheusRule/alerts/podRestarts/restarts',
      '/metrics/prometheusRule/alerts/feedLag/seconds',
    ]) {
      expect(result.stderr, path).to.contain(`at '${path}'`);
    }
    expect(result.stderr).to.match(/additional properties 'memory' not allowed/);
  });

  it('leave the change feeds out of the latency alert by default: a feed lasts as long as its reader', () => {
    const expr = alertRules(manifests).find((rule) => rule.alert === 'KvcrudHighLatency')?.expr ?? '';
    const [, routes = ''] = /route!~`([^`]*)`/.exec(expr) ?? [];
    expect(new RegExp(`^(?:${routes})$`).test('/v2/stores/:store/instances/:instance/tables/:table/changes'), routes).to.equal(true);
    expect(new RegExp(`^(?:${routes})$`).test('/v2/stores/:store/instances/:instance/tables/:table/rows'), routes).to.equal(false);
  });

  it('name in the KvcrudHighLatency runbook each route the alert leaves out by default', () => {
    type Values = { metrics: { prometheusRule: { alerts: { latency: { ignoredRoutes: string[] } } } } };
    const values = parse(readFileSync(new URL('../../charts/kvcrud/values.yaml', import.meta.url), 'utf8')) as Values;
    const routes = values.metrics.prometheusRule.alerts.latency.ignoredRoutes;
    expect(routes).to.have.length.above(0);
    const start = OPERATIONS_DOC.indexOf('\n### KvcrudHighLatency\n');
    const section = OPERATIONS_DOC.slice(start, OPERATIONS_DOC.indexOf('\n### ', start + 1));
    for (const route of routes) expect(section, route).to.contain(`\`${route}\``);
  });

  it('leave the latency alert on every route when ignoredRoutes is empty', async () => {
    const rules = alertRules(await render(helm, { valuesFiles: ['ci/default-values.yaml'], set: { 'metrics.prometheusRule': { enabled: true, alerts: { latency: { ignoredRoutes: [] } } } } }));
    expect(rules.find((rule) => rule.alert === 'KvcrudHighLatency')?.expr).to.not.contain('route!~');
  });
});
