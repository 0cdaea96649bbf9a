import { status } from '@grpc/grpc-js';
import { expect } from 'chai';
import { ErrorReply } from 'redis';
import { toProblem } from '../../src/http/problems.ts';
import { isTransient, toStoreError as bigtableError } from '../../src/store/bigtable/grpc-errors.ts';
import { applyEntries } from '../../src/store/bigtable/mutate-rows.ts';
import { toStoreError as sqliteError } from '../../src/store/embedded/sqlite-errors.ts';
import { StoreError } from '../../src/store/errors.ts';
import { toStoreError as redisError } from '../../src/store/redis/redis-errors.ts';
import { toStoreError as spannerError } from '../../src/store/spanner/spanner-errors.ts';

const grpcError = (code: number, message: string) => Object.assign(new Error(`${code} ${message}`), { code });

/** What each store says when it is out of space, against what it says when it throttles. */
describe('a store out of space', () => {
  it('is RESOURCE_EXHAUSTED for SQLite SQLITE_FULL, also as an extended code', () => {
    expect(sqliteError(Object.assign(new Error('database or disk is full'), { errcode: 13 }), 'commit').code).to.equal('RESOURCE_EXHAUSTED');
    expect(sqliteError(Object.assign(new Error('database or disk is full'), { errcode: 13 | (1 << 8) }), 'commit').code).to.equal('RESOURCE_EXHAUSTED');
    expect(sqliteError(Object.assign(new Error('database is locked'), { errcode: 5 }), 'commit').code).to.equal('UNAVAILABLE');
  });

  it("is RESOURCE_EXHAUSTED for Redis's OOM reply; LOADING and BUSY stay UNAVAILABLE", () => {
    expect(redisError(new ErrorReply("OOM command not allowed when used memory > 'maxmemory'."), 'mutateRow').code).to.equal('RESOURCE_EXHAUSTED');
    expect(redisError(new ErrorReply('LOADING Redis is loading the dataset in memory'), 'mutateRow').code).to.equal('UNAVAILABLE');
    expect(redisError(new ErrorReply('BUSY Redis is busy running a script.'), 'mutateRow').code).to.equal('UNAVAILABLE');
  });

  it('is RESOURCE_EXHAUSTED for a Bigtable RESOURCE_EXHAUSTED naming storage, not retried; a throttle stays UNAVAILABLE and retried', () => {
    const full = grpcError(status.RESOURCE_EXHAUSTED, 'RESOURCE_EXHAUSTED: Cluster storage utilization exceeds the limit');
    const throttled = grpcError(status.RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'Read requests'");
    expect(bigtableError(full, 'mutateRow').code).to.equal('RESOURCE_EXHAUSTED');
    expect(isTransient(full)).to.equal(false);
    expect(bigtableError(throttled, 'mutateRow').code).to.equal('UNAVAILABLE');
    expect(isTransient(throttled)).to.equal(true);
  });

  it('does not send again a MutateRows entry refused for full storage, and does send one throttled', async () => {
    const sent: number[][] = [];
    const { results } = await applyEntries(
      [0, 1],
      // eslint-disable-next-line @typescript-eslint/require-await -- a stand-in for the call, answering at once
      async function* (indexes) {
        sent.push([...indexes]);
        if (sent.length === 1) {
          yield {
            entries: [
              { index: 0, status: { code: status.RESOURCE_EXHAUSTED, message: 'Not enough disk space on the cluster' } },
              { index: 1, status: { code: status.RESOURCE_EXHAUSTED, message: 'Rate limit exceeded' } },
            ],
          };
          return;
        }
        yield { entries: indexes.map((_, position) => ({ index: position, status: {} })) };
      },
      { deadline: Date.now() + 2000 },
    );
    expect(sent).to.deep.equal([[0, 1], [1]]);
    expect(bigtableError(results.get(0), 'mutateRows').code).to.equal('RESOURCE_EXHAUSTED');
    expect(results.get(1)).to.equal(null);
  });

  it('is RESOURCE_EXHAUSTED for a Spanner RESOURCE_EXHAUSTED naming storage; sessions and quotas stay UNAVAILABLE', () => {
    expect(spannerError(grpcError(status.RESOURCE_EXHAUSTED, 'Instance storage limit exceeded'), 'commit').code).to.equal('RESOURCE_EXHAUSTED');
    expect(spannerError(grpcError(status.RESOURCE_EXHAUSTED, 'Too many active sessions in database'), 'commit').code).to.equal('UNAVAILABLE');
    expect(spannerError(grpcError(status.RESOURCE_EXHAUSTED, 'Quota exceeded'), 'commit').code).to.equal('UNAVAILABLE');
  });

  it('answers 507 INSUFFICIENT_STORAGE without the backend message', () => {
    const problem = toProblem(new StoreError('RESOURCE_EXHAUSTED', 'sqlite commit: database or disk is full'), { path: '/v1/local/insertData', requestId: 'r' });
    expect(problem).to.include({ status: 507, code: 'INSUFFICIENT_STORAGE', type: '/problems/insufficient-storage' });
    expect(problem.detail).not.to.contain('disk is full');
  });
});

describe('a Google Cloud call whose credentials give no token', () => {
  it('is UNAVAILABLE, not INTERNAL: grpc-js says UNKNOWN, the message says why', () => {
    const failed = grpcError(status.UNKNOWN, 'UNKNOWN: Getting metadata from plugin failed with error: request to http://metadata/token failed, status 500');
    expect(bigtableError(failed, 'readRows').code).to.equal('UNAVAILABLE');
    expect(spannerError(failed, 'read').code).to.equal('UNAVAILABLE');
    expect(bigtableError(grpcError(status.UNKNOWN, 'UNKNOWN: something else'), 'readRows').code).to.equal('INTERNAL');
  });
});
