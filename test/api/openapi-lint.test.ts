/**
 * The OpenAPI document as Spectral, the linter most API tooling runs, reads it with its OpenAPI
 * ruleset: no errors, on the document the service serves and on the document of each way callers
 * authenticate. Examples that do not match their schemas are errors to Spectral.
 */
import spectralCore, { type ISpectralDiagnostic, type RulesetDefinition } from '@stoplight/spectral-core';
import spectralParsers from '@stoplight/spectral-parsers';
import { oas } from '@stoplight/spectral-rulesets';
import { expect } from 'chai';
import type { AuthMode } from '../../src/config.ts';
import { API_OPERATIONS, COMMON_ERRORS } from '../../src/http/api.ts';
import { buildOpenApiDocument } from '../../src/http/openapi/openapi.ts';
import { useTestApp } from '../support/test-app.ts';

// Both are CommonJS, whose named exports Node cannot all see from ESM.
const { Document, Spectral } = spectralCore;
const { Json } = spectralParsers;

/** Spectral's severities: 0 is an error. */
const ERROR = 0;

async function lint(text: string): Promise<ISpectralDiagnostic[]> {
  const spectral = new Spectral();
  spectral.setRuleset({ extends: [[oas as RulesetDefinition, 'recommended']] });
  return spectral.run(new Document(text, Json, '/openapi.json'));
}

function errorsOf(diagnostics: readonly ISpectralDiagnostic[]): string[] {
  return diagnostics.filter((diagnostic) => Number(diagnostic.severity) === ERROR).map((diagnostic) => `${diagnostic.code} at ${diagnostic.path.join('.')}: ${diagnostic.message}`);
}

describe('the OpenAPI document under Spectral', () => {
  const app = useTestApp();

  it('has no errors as the service serves it', async () => {
    const response = await fetch(new URL('/openapi.json', app().baseUrl));
    expect(response.status).to.equal(200);
    const diagnostics = await lint(await response.text());
    expect(errorsOf(diagnostics)).to.deep.equal([]);
  });

  it('has no errors with each way of authenticating', async () => {
    const modeSets: AuthMode[][] = [['apikey'], ['oidc'], ['apikey', 'oidc']];
    for (const modes of modeSets) {
      const document = buildOpenApiDocument({
        version: '1.2.3',
        operations: API_OPERATIONS,
        commonErrors: COMMON_ERRORS,
        stores: [{ name: 'embedded', instances: ['local'], default: true }, { name: 'cache', instances: ['sessions'], default: false }],
        maxBodyBytes: 1024,
        auth: { modes, protectDocs: true },
        servesMetrics: true,
      });
      expect(errorsOf(await lint(JSON.stringify(document))), modes.join(',')).to.deep.equal([]);
    }
  });

  it('finds an example that does not match its schema, as it did the store example without capabilities and limits', async () => {
    const document = JSON.parse(await (await fetch(new URL('/openapi.json', app().baseUrl))).text()) as {
      paths: Record<string, Record<string, { responses: Record<string, { content: Record<string, { example: { stores: Array<Record<string, unknown>> } }> }> }>>;
    };
    const example = document.paths['/v2/stores']?.['get']?.responses['200']?.content['application/json']?.example;
    expect(example?.stores[0]).to.have.property('limits');
    delete example?.stores[0]?.['limits'];
    expect(errorsOf(await lint(JSON.stringify(document))).join('\n')).to.contain('oas3-valid-media-example');
  });
});
