import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { type Browser, type BrowserContext, type BrowserContextOptions, type Page, chromium } from 'playwright-core';
import { V2_OPERATIONS as V2 } from '../src/http/v2/operations.ts';
import { type KeyEntry, keysFile, newApiKey, tempDirectory } from './support/access-files.ts';
import { useTestApp } from './support/test-app.ts';

// Debian's Chromium (scripts/install-chromium.sh): Playwright's own browser download cannot work
// without internet.
const CHROMIUM = '/usr/bin/chromium';
// The machine has no internet: without the background-networking flags Chromium keeps trying
// Google's services and floods the log with refused connections.
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
// Below mocha's timeout, so a missing element fails with Playwright's message, not a bare timeout.
const ACTION_TIMEOUT_MS = 15_000;
const V1_OPERATIONS = ['createTable', 'insertData', 'readCellData', 'deleteTable'];

/** isLocalScheme tells whether the browser answers a URL itself (data:, blob:, about:), so it never leaves the machine. */
function isLocalScheme(url: URL): boolean {
  return ['data:', 'blob:', 'about:'].includes(url.protocol);
}

describe('API explorer (/docs) in headless Chromium', function () {
  this.timeout(60_000);
  let browser: Browser | undefined;
  let context: BrowserContext | undefined;

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      const message = `Chromium is not at ${CHROMIUM}: run scripts/install-chromium.sh`;
      if (process.env['CI'] === 'true') throw new Error(`CI=true but ${message}`);
      process.stderr.write(`\n  !!! ${message}. THE EXPLORER TESTS ARE SKIPPED.\n\n`);
      this.skip();
    }
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });
  const app = useTestApp();

  after(async () => {
    await browser?.close();
  });

  afterEach(async () => {
    await context?.close();
    context = undefined;
  });

  /** A page in a fresh context (no cookies, cache or storage from another test). */
  async function openPage(options: BrowserContextOptions = {}): Promise<Page> {
    if (browser === undefined) throw new Error('the browser was not launched');
    context = await browser.newContext(options);
    context.setDefaultTimeout(ACTION_TIMEOUT_MS);
    return context.newPage();
  }

  /** Waits until Swagger UI has rendered every v1 operation. */
  async function waitForOperations(page: Page): Promise<void> {
    for (const operation of V1_OPERATIONS) {
      await page.locator(`#operations-v1-${operation}`).waitFor();
    }
  }

  it('renders the explorer at /docs, where / redirects, with the four v1 operations', async () => {
    const { baseUrl } = app();
    const page = await openPage();

    const response = await page.goto(`${baseUrl}/`);
    expect(response?.request().redirectedFrom()?.url()).to.equal(`${baseUrl}/`);
    expect(response?.status()).to.equal(200);
    expect(page.url()).to.equal(`${baseUrl}/docs`);

    await waitForOperations(page);
    const blocks = await page.locator('.opblock[id^="operations-v1-"]').all();
    const v1Operations = await Promise.all(blocks.map((block) => block.getAttribute('id')));
    expect(v1Operations).to.deep.equal(V1_OPERATIONS.map((operation) => `operations-v1-${operation}`));
    expect(await page.locator('#operations-v1-readCellData .opblock-summary-path').innerText()).to.contain('/v1/{instanceID}/readCellData');
  });

  it('runs under its Content-Security-Policy without violations or script errors', async () => {
    const { baseUrl } = app();
    const page = await openPage();
    const violations: string[] = [];
    const scriptErrors: string[] = [];
    await page.exposeFunction('reportCspViolation', (violation: string) => violations.push(violation));
    // A string, not a function: the test code is type-checked without the DOM library.
    await page.addInitScript({
      content: `document.addEventListener('securitypolicyviolation', (event) =>
        window.reportCspViolation(event.effectiveDirective + ' blocked ' + event.blockedURI));`,
    });
    page.on('pageerror', (error) => scriptErrors.push(error.message));

    const response = await page.goto(`${baseUrl}/docs`);
    expect(response?.headers()['content-security-policy']).to.contain("default-src 'self'");
    await waitForOperations(page);
    await page.waitForLoadState('networkidle');

    expect(violations, 'CSP violations').to.deep.equal([]);
    expect(scriptErrors, 'uncaught script errors').to.deep.equal([]);
  });

  it('makes no request that leaves the service origin, and renders without one', async () => {
    const { baseUrl } = app();
    const origin = new URL(baseUrl).origin;
    // Chromium would drop a cross-origin load the page's CSP forbids before it became a request
    // Playwright can see; bypassing the CSP shows every load the page attempts.
    const page = await openPage({ bypassCSP: true });
    const offOrigin: string[] = [];
    const failedSameOrigin: string[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (!isLocalScheme(url) && url.origin !== origin) offOrigin.push(request.url());
    });
    page.on('requestfailed', (request) => {
      if (new URL(request.url()).origin === origin) failedSameOrigin.push(`${request.url()}: ${request.failure()?.errorText ?? '?'}`);
    });
    page.on('response', (response) => {
      if (new URL(response.url()).origin === origin && response.status() >= 400) failedSameOrigin.push(`${response.url()}: ${response.status()}`);
    });
    // Nothing gets out even if the page tries: the page must render on what the service serves.
    await page.route('**/*', (route) => (new URL(route.request().url()).origin === origin ? route.continue() : route.abort('blockedbyclient')));

    await page.goto(`${baseUrl}/docs`);
    await waitForOperations(page);
    await page.waitForLoadState('networkidle');

    expect(offOrigin, 'requests to other origins').to.deep.equal([]);
    expect(failedSameOrigin, 'failed same-origin requests').to.deep.equal([]);
  });

  it('answers "Try it out" on readCellData with the row from the store', async () => {
    const { api, baseUrl, instance } = app();
    const suffix = randomBytes(4).toString('hex');
    const tableName = `explorer-${suffix}`;
    const rowKeyId = `order#${suffix}`;
    const columnValue = `seen in the explorer ${suffix}`;
    expect((await api.post(`/v1/${instance}/createTable`, { tableName, columnFamily: 'cf' })).status).to.equal(201);
    const inserted = await api.post(`/v1/${instance}/insertData`, {
      tableName,
      rowKeyId,
      data: [{ columnFamily: 'cf', columnName: 'status', columnValue }],
    });
    expect(inserted.status).to.equal(200);

    const page = await openPage();
    await page.goto(`${baseUrl}/docs`);
    const operation = page.locator('#operations-v1-readCellData');
    await operation.locator('.opblock-summary').click();
    await operation.locator('.try-out__btn').click();
    // The inputs come prefilled with the document's examples; fill replaces them.
    await operation.locator('tr[data-param-name="instanceID"] input').fill(instance);
    await operation.locator('tr[data-param-name="tableName"] input').fill(tableName);
    await operation.locator('tr[data-param-name="id"] input').fill(rowKeyId);
    // Same origin as the page: the document's servers entry must not send the browser elsewhere.
    const answered = page.waitForResponse((response) => response.url().startsWith(`${baseUrl}/v1/${instance}/readCellData?`));
    await operation.locator('.execute').click();
    expect((await answered).status()).to.equal(200);

    // The header row of the live table has a status cell too ("Code"); the answer is in tbody.
    const live = operation.locator('.live-responses-table tbody tr.response');
    expect((await live.locator('.response-col_status').innerText()).trim()).to.equal('200');
    const body = await live.locator('.response-col_description .highlight-code pre').innerText();
    expect(JSON.parse(body)).to.deep.include({ instanceID: instance, tableName, rowKeyId });
    expect(body).to.contain(columnValue);
  });

  /**
   * Presses "Try it out" and Execute on an operation without editing anything, and returns the
   * status the page shows.
   */
  async function executeAsIs(page: Page, tag: string, operationId: string): Promise<number> {
    // Swagger UI escapes the dots of an operationId in the element's id.
    const operation = page.locator(`[id="operations-${tag}-${operationId.replaceAll('.', '\\\\.')}"]`);
    await operation.locator('.opblock-summary').first().click();
    // A second time, "Try it out" is still on from the first.
    await operation.locator('.try-out__btn').waitFor();
    if ((await operation.locator('.execute').count()) === 0) await operation.locator('.try-out__btn').click();
    const answered = page.waitForResponse((response) => /\/(v1|v2)\//.test(new URL(response.url()).pathname));
    await operation.locator('.execute').click();
    const status = (await answered).status();
    // The page shows the answer once Swagger UI re-renders, which may follow the response.
    const live = operation.locator('.live-responses-table tbody tr.response .response-col_status');
    await live.filter({ hasText: new RegExp(`^\\s*${status}\\s*$`) }).waitFor();
    // Collapsed again, so the next operation's controls are the only ones open.
    await operation.locator('.opblock-summary').first().click();
    return status;
  }

  it('answers every pre-filled example with success when Execute is pressed as is, top to bottom, deletions last', async function () {
    this.timeout(180_000);
    const { baseUrl } = app();
    const page = await openPage();
    await page.goto(`${baseUrl}/docs`);
    await waitForOperations(page);
    await page.locator('[id="operations-v2-tables\\\\.create"]').waitFor();
    // The page's own order, which is the API's: stores, tables, rows, then every deletion.
    const shown = async (tag: string) =>
      (await Promise.all((await page.locator(`.opblock[id^="operations-${tag}-"]`).all()).map((block) => block.getAttribute('id')))).map((id) =>
        // Swagger UI escapes the dots of an operationId in the element's id.
        (id ?? '').slice(`operations-${tag}-`.length).replaceAll('\\', ''),
      );
    expect(await shown('v1')).to.deep.equal(V1_OPERATIONS);
    const v2 = await shown('v2');
    expect(v2).to.deep.equal(V2.map((operation) => operation.operationId));
    expect(v2.slice(-3)).to.deep.equal(['rows.delete', 'tables.delete', 'tables.batchDelete']);

    const answered: string[] = [];
    const run = async (tag: string, operationId: string, expected: number) => {
      answered.push(`${operationId} ${await executeAsIs(page, tag, operationId)}`);
      expect(answered.at(-1), answered.join(', ')).to.equal(`${operationId} ${expected}`);
    };
    for (const operationId of V1_OPERATIONS) await run('v1', operationId, operationId === 'createTable' ? 201 : 200);
    const success = (operationId: string) => V2.find((operation) => operation.operationId === operationId)?.success.status ?? 0;
    for (const operationId of v2.slice(0, -1)) await run('v2', operationId, success(operationId));
    // Both deletions name the example table: the second finds it gone, as its description says,
    // and succeeds once it is created again.
    await run('v2', 'tables.batchDelete', 404);
    await run('v2', 'tables.create', 201);
    await run('v2', 'tables.batchDelete', 200);
  });

  describe('with AUTH_MODE apikey', () => {
    const files = tempDirectory();
    const admin: KeyEntry = { name: 'explorer-user', key: newApiKey(), role: 'admin', instances: ['*'] };
    const secured = useTestApp({
      auth: () => {
        const apiKeysFile = join(files.path, 'keys.json');
        writeFileSync(apiKeysFile, keysFile([admin]));
        return { config: { modes: ['apikey'], apiKeysFile, protectDocs: false } };
      },
    });
    after(() => files.remove());

    it('sends the API key given to "Authorize" with "Try it out", which then gets through', async () => {
      const { baseUrl, instance } = secured();
      const page = await openPage();
      await page.goto(`${baseUrl}/docs`);
      await waitForOperations(page);
      const operation = page.locator('#operations-v1-createTable');
      const tableName = `explorer-${randomBytes(4).toString('hex')}`;
      async function tryCreateTable(): Promise<{ status: number; apiKey: string | undefined }> {
        const answered = page.waitForResponse((response) => response.url() === `${baseUrl}/v1/${instance}/createTable`);
        await operation.locator('.execute').click();
        const response = await answered;
        return { status: response.status(), apiKey: (await response.request().allHeaders())['x-api-key'] };
      }

      await operation.locator('.opblock-summary').click();
      await operation.locator('.try-out__btn').click();
      await operation.locator('tr[data-param-name="instanceID"] input').fill(instance);
      await operation.locator('.body-param textarea').fill(JSON.stringify({ tableName, columnFamily: 'cf' }));
      expect(await tryCreateTable()).to.deep.equal({ status: 401, apiKey: undefined });

      await page.locator('.auth-wrapper .authorize').click();
      const dialog = page.locator('.dialog-ux');
      const apiKeyScheme = dialog.locator('.auth-container').filter({ hasText: 'X-API-Key' });
      await apiKeyScheme.locator('input').fill(admin.key);
      await apiKeyScheme.locator('button.authorize').click();
      await apiKeyScheme.locator('button.btn-done').click();

      expect(await tryCreateTable()).to.deep.equal({ status: 201, apiKey: admin.key });
      // The page shows the new answer once Swagger UI re-renders, which may follow the response.
      const live = operation.locator('.live-responses-table tbody tr.response .response-col_status');
      await live.filter({ hasText: /^\s*201\s*$/ }).waitFor({ timeout: 5000 });
    });
  });
});
