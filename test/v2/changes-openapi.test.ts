import { expect } from 'chai';
import { useTestApp } from '../support/test-app.ts';

const CHANGES_PATH = '/v2/stores/{store}/instances/{instance}/tables/{table}/changes';

interface MediaType {
  readonly schema?: { readonly $ref?: string; readonly type?: string; readonly description?: string };
}
interface Document {
  readonly paths: Record<string, Record<string, { operationId: string; parameters: Array<{ name: string; in: string }>; responses: Record<string, { content?: Record<string, MediaType> }> }>>;
  readonly components: { readonly schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
}

/** What the served OpenAPI document says of `GET …/tables/{table}/changes`. */
describe('v2 change feeds: the OpenAPI document', () => {
  const app = useTestApp();
  let document: Document;
  before(async () => {
    const response = await fetch(new URL('/openapi.json', app().baseUrl));
    expect(response.status).to.equal(200);
    document = (await response.json()) as Document;
  });

  it('declares the 200 of tables.changes as application/json (the long poll) and text/event-stream (the SSE feed)', () => {
    const operation = document.paths[CHANGES_PATH]?.['get'];
    expect(operation?.operationId).to.equal('tables.changes');
    const content = operation?.responses['200']?.content ?? {};
    expect(Object.keys(content).sort()).to.deep.equal(['application/json', 'text/event-stream']);
    expect(content['text/event-stream']?.schema?.type).to.equal('string');
    expect(content['text/event-stream']?.schema?.description).to.include('event: end');
    const json = content['application/json']?.schema?.$ref ?? '';
    const schema = document.components.schemas[json.replace('#/components/schemas/', '')];
    expect(Object.keys(schema?.properties ?? {})).to.include.members(['changes', 'cursor', 'end']);
    expect(schema?.required).to.include.members(['changes', 'cursor']);
  });

  it('declares its query parameters and its answers, 410 for an expired cursor among them', () => {
    const operation = document.paths[CHANGES_PATH]?.['get'];
    const query = (operation?.parameters ?? []).filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name);
    expect(query).to.include.members(['cursor', 'since', 'start', 'end', 'prefix', 'columns', 'wait']);
    expect(Object.keys(operation?.responses ?? {})).to.include.members(['200', '400', '404', '410', '501']);
  });
});
