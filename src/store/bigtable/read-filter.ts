import type { protos } from '@google-cloud/bigtable';
import type { FamilyPolicy, ReadSelection } from '../store.ts';
import type { Families } from './schema-cache.ts';

type RowFilter = protos.google.bigtable.v2.IRowFilter;

/**
 * readFilter is the ReadRows filter for a read: the selected families and columns, the newest
 * `versions` of each column, and nothing a family's retention policy has expired. Bigtable's GC
 * is asynchronous (hours, possibly days), so the policy is applied here as well, per family: a
 * timestamp range for maxAgeSeconds, and a cells-per-column limit of min(versions, maxVersions).
 * In a chain the range runs first and the limit counts what it passed, which gives the same cells
 * as applying both bounds to all versions, since the versions a maxAge drops are the oldest ones.
 *
 * Families the schema does not know (added outside the service since it was cached) are read with
 * the version limit alone.
 */
export function readFilter(selection: ReadSelection, families: Families, nowMs: number): RowFilter {
  const { versions } = selection;
  if (selection.columns === undefined) {
    const policied = [...families].filter(([, policy]) => narrows(policy, versions));
    if (policied.length === 0) return { cellsPerColumnLimitFilter: versions };
    const branches = policied.map(([family, policy]) => branch({ familyNameRegexFilter: exactly(family) }, policy, versions, nowMs));
    branches.push(branch({ familyNameRegexFilter: noneOf(policied.map(([family]) => family)) }, {}, versions, nowMs));
    return interleave(branches);
  }

  // One branch per family, so that overlapping selectors (a family and one of its columns, or a
  // column named twice) never yield a cell twice: an interleave outputs each branch's cells.
  const selected = new Map<string, Map<string, Buffer> | 'all'>();
  for (const { family, column } of selection.columns) {
    const columns = selected.get(family);
    if (columns === 'all') continue;
    if (column === undefined) selected.set(family, 'all');
    else if (columns === undefined) selected.set(family, new Map([[column.toString('latin1'), column]]));
    else columns.set(column.toString('latin1'), column);
  }
  const branches = [...selected].map(([family, columns]) => {
    const select =
      columns === 'all'
        ? { familyNameRegexFilter: exactly(family) }
        : interleave([...columns.values()].map((column) => ({ columnRangeFilter: { familyName: family, startQualifierClosed: column, endQualifierClosed: column } })));
    return branch(select, families.get(family) ?? {}, versions, nowMs);
  });
  return interleave(branches);
}

/**
 * Whether a family's policy drops cells that the version limit alone would return. A family that
 * keeps at least `versions` versions and has no age limit (v1's families, which keep one version,
 * read at one) needs no branch of its own: its reads stay a single cells-per-column limit, which
 * costs the backend less than an interleave of regular expressions.
 */
function narrows(policy: FamilyPolicy, versions: number): boolean {
  return policy.maxAgeSeconds !== undefined || (policy.maxVersions !== undefined && policy.maxVersions < versions);
}

function branch(select: RowFilter, policy: FamilyPolicy, versions: number, nowMs: number): RowFilter {
  const filters = [select];
  if (policy.maxAgeSeconds !== undefined) {
    // Microseconds, rounded up to the millisecond: tables keep millisecond timestamps, so the
    // same versions pass, and a millisecond bound is valid at either granularity.
    const oldestKept = Math.ceil(nowMs - policy.maxAgeSeconds * 1000) * 1000;
    if (oldestKept > 0) filters.push({ timestampRangeFilter: { startTimestampMicros: oldestKept } });
  }
  filters.push({ cellsPerColumnLimitFilter: Math.min(versions, policy.maxVersions ?? versions) });
  return { chain: { filters } };
}

function interleave(filters: RowFilter[]): RowFilter {
  return filters.length === 1 ? (filters[0] as RowFilter) : { interleave: { filters } };
}

/** An RE2 pattern matching `name` and nothing else. */
export function exactly(name: string): string {
  return `^${escape(name)}$`;
}

/**
 * noneOf is an RE2 pattern matching every family name except `names`. RE2 has no negative
 * lookahead, so the pattern is the complement of a trie of the names: at each node, any character
 * that leads off the trie, or a child followed by its own complement; a node that ends a name
 * does not match the empty rest.
 */
export function noneOf(names: readonly string[]): string {
  const root: TrieNode = { ends: false, children: new Map() };
  for (const name of names) {
    let node = root;
    for (const char of name) {
      let child = node.children.get(char);
      if (child === undefined) {
        child = { ends: false, children: new Map() };
        node.children.set(char, child);
      }
      node = child;
    }
    node.ends = true;
  }
  return `(?s)^${complement(root)}$`;
}

interface TrieNode {
  ends: boolean;
  readonly children: Map<string, TrieNode>;
}

function complement(node: TrieNode): string {
  const chars = [...node.children.keys()];
  const alternatives = chars.length === 0 ? ['.+'] : [`[^${chars.map(escapeInClass).join('')}].*`];
  for (const [char, child] of node.children) alternatives.push(escape(char) + complement(child));
  return `(?:${alternatives.join('|')})${node.ends ? '' : '?'}`;
}

function escape(text: string): string {
  return text.replace(/[\\.+*?()|[\]{}^$]/g, '\\$&');
}

function escapeInClass(char: string): string {
  return /[\\\]^-]/.test(char) ? `\\${char}` : char;
}
