import { type Manifest, only } from './helm.ts';

/** The lint variant with the PrometheusRule on. */
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
