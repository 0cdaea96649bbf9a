import type { Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import { ApiError } from '../../service/errors.ts';
import type { AppState } from '../app-state.ts';

const JSON_TYPES = ['application/json', '+json'];

/**
 * jsonBody parses a JSON request body (with koa-body) into ctx.request.body, enforcing the size
 * limit, and turns every way a body can be unacceptable into its API error. Without a body,
 * ctx.request.body stays undefined, for the schema to report as missing.
 */
export function jsonBody(options: { limitBytes: number }): Middleware<AppState> {
  const parse = koaBody({
    json: true,
    jsonTypes: JSON_TYPES,
    jsonStrict: true,
    jsonLimit: options.limitBytes,
    urlencoded: false,
    text: false,
    multipart: false,
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
  });

  return async (ctx, next) => {
    const type = ctx.is(JSON_TYPES);
    if (type === null || ctx.request.length === 0) {
      await next(); // no body: ctx.request.body stays undefined
      return;
    }
    if (type === false) {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `The body must be application/json, not "${ctx.get('Content-Type')}".`);
    }
    const charset = ctx.request.charset.toLowerCase();
    if (charset !== '' && charset !== 'utf-8' && charset !== 'utf8') {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `The body must be UTF-8, not "${charset}".`);
    }
    try {
      await parse(ctx, async () => {});
    } catch (error) {
      throw bodyError(error, options.limitBytes);
    }
    await next();
  };
}

// co-body and raw-body report with http-errors style status and type fields.
function bodyError(error: unknown, limitBytes: number): unknown {
  const { status, type } = error as { status?: number; type?: string };
  if (status === 413) {
    return new ApiError('PAYLOAD_TOO_LARGE', `The body is larger than the limit of ${limitBytes} bytes.`);
  }
  if (status === 415) {
    return new ApiError('UNSUPPORTED_MEDIA_TYPE', 'The body has a content encoding or charset the service cannot read.');
  }
  if (type === 'request.aborted' || type === 'request.size.invalid') {
    return new ApiError('MALFORMED_JSON', 'The body was cut short.');
  }
  if (status === 400 || error instanceof SyntaxError) {
    // The parser's message says where the JSON breaks; it holds nothing but the caller's own input.
    const reason = error instanceof Error ? `: ${error.message}` : '';
    return new ApiError('MALFORMED_JSON', `The body is not a valid JSON object or array${reason}.`);
  }
  return error;
}
