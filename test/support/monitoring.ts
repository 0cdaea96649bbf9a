import { type Manifest, only } from './helm.ts';

/** The lint variant with the PrometheusRule, the dashboard and the helm test on. */
export const MONITORING_VALUES = 'ci/monitoring-values.yaml';

/** One rule of a PrometheusRule group: an alert or a recording rule. */
export interface Rule {
  readonly alert?: string;
  readonly record?: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface RuleGroup {
  readonly name: string;
  readonly rules: readonly Rule[];
}

/** The groups of the release's PrometheusRule: a Prometheus rule file's content. */
export function ruleGroups(manifests: readonly Manifest[]): RuleGroup[] {
  return only(manifests, 'PrometheusRule')['spec'].groups as RuleGroup[];
}

/** The alerting rules of the release's PrometheusRule. */
export function alertRules(manifests: readonly Manifest[]): Rule[] {
  return ruleGroups(manifests).flatMap((group) => group.rules.filter((rule) => rule.alert !== undefined));
}

/** A Grafana panel (rows hold panels of their own when collapsed). */
export interface Panel {
  readonly type: string;
  readonly title: string;
  readonly datasource?: { readonly type: string; readonly uid: string };
  readonly targets?: ReadonlyArray<{ readonly expr: string; readonly legendFormat?: string; readonly refId: string }>;
  readonly panels?: readonly Panel[];
  readonly gridPos: { readonly h: number; readonly w: number; readonly x: number; readonly y: number };
}

export interface TemplateVariable {
  readonly name: string;
  readonly type: string;
  readonly query: string | { readonly query: string };
  readonly includeAll?: boolean;
  readonly allValue?: string;
}

export interface Dashboard {
  readonly uid: string;
  readonly title: string;
  readonly panels: readonly Panel[];
  readonly templating: { readonly list: readonly TemplateVariable[] };
}

/** The dashboard of the release's dashboard ConfigMap, parsed. */
export function dashboard(manifests: readonly Manifest[]): Dashboard {
  const configMaps = manifests.filter((manifest) => manifest['kind'] === 'ConfigMap' && manifest['data']?.['kvcrud.json'] !== undefined);
  if (configMaps.length !== 1) throw new Error(`expected one dashboard ConfigMap, found ${configMaps.length}`);
  return JSON.parse(configMaps[0]?.['data']['kvcrud.json'] as string) as Dashboard;
}

/** Every panel of the dashboard, those inside rows included, rows left out. */
export function panels(board: Dashboard): Panel[] {
  return board.panels.flatMap((panel) => (panel.type === 'row' ? [...(panel.panels ?? [])] : [panel]));
}

/** A PromQL expression and where it comes from, for messages. */
export interface Query {
  readonly where: string;
  readonly expr: string;
}

/** The query of a template variable: label_values(SELECTOR, label) gives SELECTOR and the label. */
export function variableQuery(variable: TemplateVariable): { selector: string; label: string } | undefined {
  const text = typeof variable.query === 'string' ? variable.query : variable.query.query;
  const match = /^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$/s.exec(text.trim());
  return match === null ? undefined : { selector: match[1] ?? '', label: match[2] ?? '' };
}

/** Every PromQL expression of the dashboard: each panel target's, and each variable's selector. */
export function dashboardQueries(board: Dashboard): Query[] {
  const targets = panels(board).flatMap((panel) => (panel.targets ?? []).map((target) => ({ where: `panel "${panel.title}" ${target.refId}`, expr: target.expr })));
  const variables = board.templating.list.flatMap((variable) => {
    if (variable.type !== 'query') return [];
    const query = variableQuery(variable);
    if (query === undefined) throw new Error(`variable ${variable.name}: not a label_values(selector, label) query`);
    return [{ where: `variable ${variable.name}`, expr: query.selector }];
  });
  return [...targets, ...variables];
}

/** Grafana's own interval variables, as the dashboard uses them in range selectors. */
const INTERVAL_VARIABLES = new Set(['__rate_interval', '__interval', '__range']);
const VARIABLE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g;

/** The names of the variables an expression uses ($name or ${name}). */
export function variablesUsed(expr: string): string[] {
  return [...expr.matchAll(VARIABLE)].map((match) => match[1] ?? match[2] ?? '');
}

/**
 * The expression as Prometheus gets it: Grafana puts a duration for its interval variables and,
 * for the dashboard's own (all of them regex matchers, with "All" as .*), the chosen values.
 */
export function asPromql(expr: string): string {
  return expr.replace(VARIABLE, (_, braced: string | undefined, bare: string | undefined) => (INTERVAL_VARIABLES.has(braced ?? bare ?? '') ? '5m' : '.*'));
}
