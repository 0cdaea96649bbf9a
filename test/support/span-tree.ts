/** What a span tree is drawn from: a span's name, its id and its parent's id. */
export interface SpanNode {
  readonly name: string;
  readonly spanId: string;
  readonly parentSpanId?: string | undefined;
}

/**
 * The spans as an indented tree of names, children under their parent in the order given, e.g.
 * "GET /v1/:instanceID/readCellData\n  DataStore.readRows\n    grpc...". A span whose parent is
 * not among them (the caller's) is a root.
 */
export function spanTree(spans: readonly SpanNode[]): string {
  const ids = new Set(spans.map((span) => span.spanId));
  const lines: string[] = [];
  const visit = (parentId: string | undefined, depth: number) => {
    for (const span of spans) {
      const parent = span.parentSpanId === undefined || span.parentSpanId === '' || !ids.has(span.parentSpanId) ? undefined : span.parentSpanId;
      if (parent !== parentId) continue;
      lines.push(`${'  '.repeat(depth)}${span.name}`);
      visit(span.spanId, depth + 1);
    }
  };
  visit(undefined, 0);
  return lines.join('\n');
}
