import { expect } from 'chai';
import { isSpannerClientError } from '../../src/store/spanner/client-rejections.ts';

describe('the Spanner client rejections the service tolerates', () => {
  const error = (message: string, code: number | undefined, stack: string) => Object.assign(new Error(message), code === undefined ? {} : { code }, { stack: `Error: ${message}\n${stack}` });
  const clientFrame = '    at repeat (/app/node_modules/@google-cloud/spanner-api/node_modules/google-gax/build/src/normalCalls/retries.js:97:31)';

  it('are gRPC errors of calls the Spanner client made on its own', () => {
    expect(isSpannerClientError(error('Total timeout of API google.spanner.v1.Spanner exceeded 30000 milliseconds', 4, clientFrame))).to.equal(true);
    expect(isSpannerClientError(error('5 NOT_FOUND: Session not found', 5, `    at callErrorFromStatus (/app/node_modules/@grpc/grpc-js/build/src/call.js:32:19)\nfor call at\n    at /app/node_modules/@google-cloud/spanner-api/build/src/v1/spanner_client.js:255:29`))).to.equal(true);
  });

  it('are nothing else: errors of other code, errors without a status code, non-errors', () => {
    expect(isSpannerClientError(error('Total timeout of API google.bigtable.v2.Bigtable exceeded', 4, '    at repeat (/app/node_modules/google-gax/build/src/normalCalls/retries.js:97:31)'))).to.equal(false);
    expect(isSpannerClientError(error('Cannot read properties of undefined', undefined, clientFrame))).to.equal(false);
    expect(isSpannerClientError(error('boom', 2, '    at file:///app/src/store/spanner/spanner-store.ts:10:5'))).to.equal(false);
    expect(isSpannerClientError('Total timeout of API google.spanner.v1.Spanner exceeded')).to.equal(false);
  });
});

describe('the Spanner client rejections after it was closed', () => {
  it('are tolerated too: the client answers calls it retries on its own after the store closed', () => {
    const closed = Object.assign(new Error('The client has already been closed.'), {
      stack: 'Error: The client has already been closed.\n    at /app/node_modules/@google-cloud/spanner-api/node_modules/google-gax/build/src/normalCalls/retries.js:145:30',
    });
    expect(isSpannerClientError(closed)).to.equal(true);
    expect(isSpannerClientError('The client has already been closed.')).to.equal(true);
    expect(isSpannerClientError(new Error('The client has already been closed.'))).to.equal(false);
  });
});
