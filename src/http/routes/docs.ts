import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Router } from '@koa/router';
import type { Middleware, ParameterizedContext } from 'koa';
import { koaSwagger } from 'koa2-swagger-ui';
import { ApiError, ERROR_CODES } from '../../service/errors.ts';
import type { AppState } from '../app-state.ts';
import { PROBLEM_TYPES, problemSlug, problemType } from '../problems.ts';

const require = createRequire(import.meta.url);
const SWAGGER_UI_DIR = dirname(require.resolve('swagger-ui-dist/package.json'));
const SWAGGER_UI_VERSION = (JSON.parse(readFileSync(join(SWAGGER_UI_DIR, 'package.json'), 'utf8')) as { version: string }).version;
const ASSETS_PREFIX = '/docs/assets';

// The explorer page names these files (koa2-swagger-ui's template asks for the .min.css a CDN has).
const ASSETS: Record<string, { file: string; type: string }> = {
  'swagger-ui-bundle.js': { file: 'swagger-ui-bundle.js', type: 'application/javascript' },
  'swagger-ui-standalone-preset.js': { file: 'swagger-ui-standalone-preset.js', type: 'application/javascript' },
  'swagger-ui.min.css': { file: 'swagger-ui.css', type: 'text/css' },
};

// The page must work in a cluster without internet: nothing may load from another origin.
const EXPLORER_CSP = [
  "default-src 'self'",
  "script-src 'self' 'unsafe-inline'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * docsRoutes serves the API's documentation: the OpenAPI document, the interactive explorer
 * (koa2-swagger-ui) with its swagger-ui assets from this service rather than a CDN, and a page
 * per problem type, so the `type` URI of every error resolves.
 *
 * `openApiJson` gives the document for the request's reader (see openApiDocuments). `guard`
 * (AUTH_PROTECT_DOCS) runs before the explorer page and the document. The swagger-ui
 * assets (public library code) and the problem pages (which 401 answers link to) stay open.
 * `order` lists the operationIds in the order the explorer shows them in each group.
 */
export function docsRoutes(
  router: Router<AppState>,
  openApiJson: (ctx: ParameterizedContext<AppState>) => string,
  guard: readonly Middleware<AppState>[] = [],
  order: readonly string[] = [],
): void {
  const assets = new Map(
    Object.entries(ASSETS).map(([name, asset]) => [name, { body: readFileSync(join(SWAGGER_UI_DIR, asset.file)), type: asset.type }]),
  );
  const explorer = koaSwagger({
    routePrefix: '/docs',
    title: 'kvcrud API explorer',
    swaggerCdnUrl: ASSETS_PREFIX,
    swaggerVersion: SWAGGER_UI_VERSION,
    hideTopbar: true,
    swaggerOptions: {
      url: '/openapi.json',
      // Swagger UI would otherwise fetch a badge from validator.swagger.io.
      validatorUrl: null,
      displayRequestDuration: true,
      docExpansion: 'list',
      plugins: operationOrderPlugin(order),
    },
  });

  router.get('/', (ctx) => {
    ctx.redirect('/docs');
  });

  router.get('/docs', ...guard, async (ctx, next) => {
    await explorer(ctx, next);
    if (typeof ctx.body === 'string') ctx.body = withoutCrossOriginLinks(ctx.body);
    ctx.set('Content-Security-Policy', EXPLORER_CSP);
  });

  // koa2-swagger-ui's page links its favicon at the root.
  router.get('/favicon.png', explorer);

  router.get(`${ASSETS_PREFIX}/${SWAGGER_UI_VERSION}/:file`, (ctx) => {
    const asset = assets.get(ctx.params['file'] ?? '');
    if (asset === undefined) throw new ApiError('ROUTE_NOT_FOUND', `No asset at ${ctx.path}.`);
    ctx.type = asset.type;
    // The version is in the path, so the file under it never changes.
    ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
    ctx.body = asset.body;
  });

  router.get('/openapi.json', ...guard, (ctx) => {
    ctx.type = 'application/json';
    ctx.body = openApiJson(ctx);
  });

  router.get('/problems/:slug', (ctx) => {
    const code = ERROR_CODES.find((candidate) => problemSlug(candidate) === ctx.params['slug']);
    if (code === undefined) throw new ApiError('ROUTE_NOT_FOUND', `No problem type at ${ctx.path}.`);
    ctx.body = { type: problemType(code), code, ...PROBLEM_TYPES[code] };
  });
}

/**
 * A Swagger UI plugin (as the source the page's script includes) that shows each group's
 * operations in `order`. Swagger UI keeps the document's order, where the operations of one path
 * stay together: "Delete a table" would follow "Describe a table", and the row examples after it
 * would find no table. Operations not in `order` come last, as the document has them.
 */
function operationOrderPlugin(order: readonly string[]): string {
  // JSON of plain operationIds; "<" escaped all the same, as it goes into a <script>.
  const ranks = JSON.stringify(Object.fromEntries(order.map((operationId, index) => [operationId, index]))).replaceAll('<', '\\u003c');
  return `function OperationOrderPlugin() {
    var ranks = ${ranks};
    var rank = function (operation) {
      var found = ranks[operation.getIn(['operation', 'operationId'])];
      return found === undefined ? ${order.length} : found;
    };
    return { statePlugins: { spec: { wrapSelectors: {
      taggedOperations: function (original) {
        return function () {
          var tagged = original.apply(null, arguments);
          var sort = function (groups) {
            return groups.map(function (group) { return group.set('operations', group.get('operations').sortBy(rank)); });
          };
          return typeof tagged === 'function' ? function (system) { return sort(tagged(system)); } : sort(tagged);
        };
      }
    } } } };
  }`;
}

/** Drops the <link> elements koa2-swagger-ui's template points at other origins (web fonts). */
function withoutCrossOriginLinks(html: string): string {
  return html.replace(/<link\b[^>]*\bhref="(?:https?:)?\/\/[^"]*"[^>]*>/gi, '');
}
