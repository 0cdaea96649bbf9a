import type { Context } from 'koa';
import type { ServedStores } from '../../auth/access.ts';
import type { AppState } from '../app-state.ts';
import { type DocumentedStore, documentedStores } from './openapi.ts';

/** Distinct documents kept: one per set of stores and instances readers may use, so a few per grant file. */
const DOCUMENTS_KEPT = 64;

export interface OpenApiDocumentsOptions {
  /** The stores and instances the service serves. */
  readonly served: ServedStores;
  /** Whether callers authenticate; without it every caller may use every instance. */
  readonly authenticated: boolean;
  /** Builds the document naming these stores and instances. */
  readonly build: (stores: readonly DocumentedStore[]) => object;
}

/**
 * openApiDocuments gives each request the OpenAPI document (as JSON text) for its reader: naming
 * every served store and instance when anyone may use them all, otherwise only those the
 * authenticated caller's grants cover, and none to a caller without a credential. Documents are
 * built once per set of stores and instances and kept.
 */
export function openApiDocuments(options: OpenApiDocumentsOptions): (ctx: Pick<Context, 'state'> & { state: AppState }) => string {
  const kept = new Map<string, string>();
  // The document of a reader without a credential is built now: a schema the generator cannot
  // describe fails at start-up, not on the first request.
  const anonymous = documentedStores(options.served, options.authenticated, undefined);
  kept.set(JSON.stringify(anonymous), JSON.stringify(options.build(anonymous)));
  return (ctx) => {
    const stores = documentedStores(options.served, options.authenticated, ctx.state.caller);
    const key = JSON.stringify(stores);
    let json = kept.get(key);
    if (json === undefined) {
      json = JSON.stringify(options.build(stores));
      if (kept.size >= DOCUMENTS_KEPT) kept.delete(kept.keys().next().value ?? '');
      kept.set(key, json);
    }
    return json;
  };
}
