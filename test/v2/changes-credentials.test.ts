/**
 * A change feed lasts as long as its reader, but not longer than the credential that opened it: a
 * feed opened with an OIDC token ends when the token expires, with its cursor, so the reader
 * resumes with a new token and loses nothing.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { tempDirectory } from '../support/access-files.ts';
import { EventStreamClient } from '../support/event-stream-client.ts';
import { TEST_AUDIENCE, TestIssuer } from '../support/test-issuer.ts';
import { useTestApp } from '../support/test-app.ts';
import { v2Paths } from '../support/v2.ts';

const READER = 'system:serviceaccount:shop:projection';
const ADMIN = 'system:serviceaccount:shop:admin';

describe('v2 change feeds and expiring credentials', () => {
  let issuer: TestIssuer;
  before(async () => {
    issuer = await TestIssuer.start();
  });
  after(async () => {
    await issuer?.close();
  });
  const files = tempDirectory();
  after(() => files.remove());
  const app = useTestApp({
    auth: () => {
      const grantsFile = join(files.path, 'grants.json');
      writeFileSync(
        grantsFile,
        JSON.stringify({
          grants: [
            { subject: READER, role: 'reader', instances: ['*'] },
            { subject: ADMIN, role: 'admin', instances: ['*'] },
          ],
        }),
      );
      return {
        config: { modes: ['oidc'], protectDocs: false, oidc: { issuer: issuer.issuer, audiences: [TEST_AUDIENCE], grantsFile } },
        oidcTiming: { clockToleranceSeconds: 0, cooldownMs: 30_000, refreshMs: 600_000, fetchTimeoutMs: 2000, retryAfterFailureMs: 5000 },
      };
    },
  });

  it('ends a feed with CREDENTIAL_EXPIRED and its cursor when the token that opened it expires', async function () {
    this.timeout(30_000);
    const admin = app().api.as({ authorization: `Bearer ${await issuer.sign(ADMIN)}` });
    const created = await admin.post(v2Paths(app()).tables, { name: 'followed', families: [{ name: 'cf' }] });
    expect(created.status).to.equal(201);
    const exp = Math.floor(Date.now() / 1000) + 3;
    const token = await issuer.sign(READER, { claims: { exp } });
    const stream = await EventStreamClient.open(`${app().baseUrl}${v2Paths(app()).table('followed')}/changes`, { authorization: `Bearer ${token}` });
    expect(stream.status, stream.body).to.equal(200);
    await stream.until((client) => client.ended, 'the end of the stream', 15_000);
    const end = stream.events.at(-1);
    expect(end?.event).to.equal('end');
    expect(JSON.parse(end?.data ?? '{}')).to.include({ reason: 'CREDENTIAL_EXPIRED', cursor: end?.id });
    expect(Date.now() / 1000, 'ended at the token\'s exp').to.be.within(exp - 0.5, exp + 5);
    await stream.close();
    // A new token resumes from the cursor.
    const resumed = await EventStreamClient.open(`${app().baseUrl}${v2Paths(app()).table('followed')}/changes?cursor=${end?.id ?? ''}`, { authorization: `Bearer ${await issuer.sign(READER)}` });
    expect(resumed.status).to.equal(200);
    await resumed.close();
  });

  it('refuses a feed to a caller without the reader role with 403, before opening it', async () => {
    const stranger = await issuer.sign('system:serviceaccount:shop:nobody');
    const response = await app().api.as({ authorization: `Bearer ${stranger}` }).get(`${v2Paths(app()).table('followed')}/changes`);
    expect(response.status).to.equal(403);
  });
});
