// The helm test of a kvcrud release (templates/tests/test-service.yaml), run by the service's own
// Node.js: GET /readyz through the Service must answer ready (every store answers), then
// GET /v2/stores/KVCRUD_STORE must describe the default store to the test's credential. Each step
// prints what it checked; a failure prints what the service answered, and the pod fails.
const base = process.env.KVCRUD_URL;
const store = process.env.KVCRUD_STORE;
const apiKey = process.env.KVCRUD_API_KEY;
// Pods may still be starting when the test is run right after an install.
const readyWithinMs = Number(process.env.KVCRUD_READY_WITHIN_SECONDS) * 1000;

async function get(path, headers = {}) {
  const response = await fetch(`${base}${path}`, { headers, signal: AbortSignal.timeout(10_000) });
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, body, text: text.slice(0, 1000) };
}

function fail(message) {
  console.error(`FAIL ${message}`);
  process.exit(1);
}

let ready;
const deadline = Date.now() + readyWithinMs;
for (;;) {
  try {
    ready = await get('/readyz');
    if (ready.status === 200 && ready.body?.status === 'ready') break;
  } catch (error) {
    ready = { error };
  }
  if (Date.now() > deadline) break;
  await new Promise((resolve) => setTimeout(resolve, 2_000));
}
if (ready.error !== undefined) fail(`GET ${base}/readyz: ${ready.error.cause?.message ?? ready.error.message}`);
if (ready.status !== 200 || ready.body?.status !== 'ready') {
  fail(`GET /readyz answered ${ready.status} ${ready.text} (degraded: a store does not answer; the pods' log names it)`);
}
console.log(`ok   GET /readyz: ${ready.text}`);

const described = await get(`/v2/stores/${encodeURIComponent(store)}`, apiKey === undefined ? {} : { 'x-api-key': apiKey });
if (described.status !== 200) {
  const hint = described.status === 401 || described.status === 403 ? ' (tests.apiKey: a key with a role on the default store)' : '';
  fail(`GET /v2/stores/${store} answered ${described.status}${hint}: ${described.text}`);
}
if (described.body?.name !== store || described.body?.default !== true) {
  fail(`GET /v2/stores/${store} does not describe the default store ${store}: ${described.text}`);
}
console.log(`ok   GET /v2/stores/${store}: driver ${described.body.driver}, instances ${described.body.instances.join(', ')}`);
