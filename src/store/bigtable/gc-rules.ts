import type { protos } from '@google-cloud/bigtable';
import type { FamilyPolicy } from '../store.ts';

type GcRule = protos.google.bigtable.admin.v2.IGcRule;
type Duration = protos.google.protobuf.IDuration;

/**
 * gcRuleFor is the garbage-collection rule that carries out a family's retention policy:
 * max_num_versions for maxVersions, max_age for maxAgeSeconds, and a union of the two when both
 * are set (a union drops a version as soon as either rule would). No policy: no rule, and Bigtable
 * keeps every version.
 */
export function gcRuleFor(policy: FamilyPolicy): GcRule | undefined {
  const rules: GcRule[] = [];
  if (policy.maxVersions !== undefined) rules.push({ maxNumVersions: policy.maxVersions });
  if (policy.maxAgeSeconds !== undefined) rules.push({ maxAge: durationOf(policy.maxAgeSeconds) });
  if (rules.length <= 1) return rules[0];
  return { union: { rules } };
}

/**
 * policyOf is the retention policy a family's GC rule amounts to, as kvcrud's model can say it: a
 * version is gone as soon as either bound says so. Rules kvcrud writes map back exactly. Of the
 * rules other tools can write, nested unions fold into the smallest bounds, and an intersection
 * of rules of one kind keeps the largest bound. An intersection of a version count with an age
 * (drop only versions both beyond the count and older than the age) has no exact equivalent: it
 * is read as the union of the two, so that reads never show a version Bigtable may have dropped,
 * at the cost of hiding some it still keeps.
 */
export function policyOf(rule: GcRule | null | undefined): FamilyPolicy {
  if (rule === null || rule === undefined) return {};
  if (rule.maxNumVersions !== null && rule.maxNumVersions !== undefined) return { maxVersions: rule.maxNumVersions };
  if (rule.maxAge !== null && rule.maxAge !== undefined) return { maxAgeSeconds: secondsOf(rule.maxAge) };
  if (rule.union?.rules) return rule.union.rules.map(policyOf).reduce(tighter, {});
  if (rule.intersection?.rules) return intersectionOf(rule.intersection.rules.map(policyOf));
  return {};
}

function intersectionOf(policies: FamilyPolicy[]): FamilyPolicy {
  if (policies.length === 0) return {};
  // A component that keeps everything makes the intersection keep everything.
  if (policies.some((policy) => policy.maxVersions === undefined && policy.maxAgeSeconds === undefined)) return {};
  const versionsOnly = policies.every((policy) => policy.maxAgeSeconds === undefined);
  const ageOnly = policies.every((policy) => policy.maxVersions === undefined);
  if (versionsOnly) return { maxVersions: Math.max(...policies.map((policy) => policy.maxVersions ?? 0)) };
  if (ageOnly) return { maxAgeSeconds: Math.max(...policies.map((policy) => policy.maxAgeSeconds ?? 0)) };
  return policies.reduce(tighter, {});
}

/** The policy that drops a version when either of two policies would. */
function tighter(a: FamilyPolicy, b: FamilyPolicy): FamilyPolicy {
  const maxVersions = smaller(a.maxVersions, b.maxVersions);
  const maxAgeSeconds = smaller(a.maxAgeSeconds, b.maxAgeSeconds);
  return { ...(maxVersions === undefined ? {} : { maxVersions }), ...(maxAgeSeconds === undefined ? {} : { maxAgeSeconds }) };
}

function smaller(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}

function durationOf(seconds: number): Duration {
  const whole = Math.floor(seconds);
  return { seconds: whole, nanos: Math.round((seconds - whole) * 1e9) };
}

function secondsOf(duration: Duration): number {
  // int64 seconds arrive as a string or a Long, depending on the client's decoding options.
  return Number(String(duration.seconds ?? 0)) + (duration.nanos ?? 0) / 1e9;
}
