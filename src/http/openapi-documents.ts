import type { Context } from 'koa';
import { callerMay } from '../auth/access.ts';
import type { AppState } from './app-state.ts';
import { documentedInstances } from './openapi.ts';

/** Distinct documents kept: one per set of instances readers may use, so a few per grant file. */
const DOCUMENTS_KEPT = 64;

export interface OpenApiDocumentsOptions {
  /** The instances the service serves. */
  readonly served: readonly string[];
  /** Whether callers authenticate; without it every caller may use every instance. */
  readonly authenticated: boolean;
  /** Builds the document naming these instances. */
  readonly build: (instanceIds: readonly string[]) => object;
}

/**
 * openApiDocuments gives each request the OpenAPI document (as JSON text) for its reader: naming
 * every served instance when anyone may use them all, otherwise only those the authenticated
 * caller's grants cover, and none to a caller without a credential. Documents are built once per
 * set of instances and kept.
 */
export function openApiDocuments(options: OpenApiDocumentsOptions): (ctx: Pick<Context, 'state'> & { state: AppState }) => string {
  const kept = new Map<string, string>();
  // The document of a reader without a credential is built now: a schema the generator cannot
  // describe fails at start-up, not on the first request.
  const anonymous = documentedInstances(options.served, options.authenticated, undefined);
  kept.set(anonymous.join(','), JSON.stringify(options.build(anonymous)));
  return (ctx) => {
    const caller = ctx.state.caller;
    const names = documentedInstances(options.served, options.authenticated, caller && ((instance) => callerMay(caller, instance, 'reader')));
    const key = names.join(',');
    let json = kept.get(key);
    if (json === undefined) {
      json = JSON.stringify(options.build(names));
      if (kept.size >= DOCUMENTS_KEPT) kept.delete(kept.keys().next().value ?? '');
      kept.set(key, json);
    }
    return json;
  };
}
