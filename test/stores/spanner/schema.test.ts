import { expect } from 'chai';
import { pino } from 'pino';
import { SpannerStore } from '../../../src/store/spanner/spanner-store.ts';
import { SCHEMA_VERSION } from '../../../src/store/spanner/schema.ts';
import { randomInstanceId } from '../../support/driver-harness.ts';
import { spannerSide } from '../../support/spanner-sql.ts';
import { requireSpanner, sharedSpannerEmulator } from '../../support/spanner-emulator.ts';
import { TEST_PROJECT } from '../../support/emulator.ts';

const call = () => ({ deadline: Date.now() + 30_000 });

describe('spanner: the schema', () => {
  const side = spannerSide();
  const stores: SpannerStore[] = [];
  let host: string;
  const open = (instances: readonly string[]) => {
    const store = SpannerStore.open({ projectId: TEST_PROJECT, instance: side.instance, emulatorHost: host, instances, logger: pino({ level: 'silent' }) });
    stores.push(store);
    return store;
  };

  before(async function () {
    requireSpanner(this);
    host = (await sharedSpannerEmulator()).host;
  });
  after(async () => {
    await Promise.all(stores.map((store) => store.close()));
    await side.close();
  });

  it('is created once when two replicas start at once against a new database, and both serve', async () => {
    const instance = randomInstanceId();
    const [first, second] = [open([instance]), open([instance])];
    await Promise.all([first?.checkHealth(call()), second?.checkHealth(call())]);
    await first?.createTable({ instance, table: 't' }, [{ name: 'f' }], call());
    expect(await second?.listTables(instance, call())).to.deep.equal(['t']);
    const [rows] = await (await side.database(instance)).run({ sql: 'SELECT id, version FROM kvcrud_schema', json: true });
    expect(rows).to.deep.equal([{ id: 0, version: SCHEMA_VERSION }]);
  });

  it('is refused, with the versions named, when a newer kvcrud wrote it', async () => {
    const instance = randomInstanceId();
    await open([instance]).checkHealth(call());
    const database = await side.database(instance);
    await database.runTransactionAsync(async (transaction) => {
      await transaction.runUpdate({ sql: 'UPDATE kvcrud_schema SET version = @version WHERE id = 0', params: { version: SCHEMA_VERSION + 1 } });
      await transaction.commit();
    });
    const later = open([instance]);
    const failure = await later.listTables(instance, call()).then(
      () => undefined,
      (error: unknown) => error as Error & { code?: string },
    );
    expect(failure?.code).to.equal('INTERNAL');
    expect(failure?.message).to.contain(`schema version ${SCHEMA_VERSION + 1}`).and.to.contain(`up to ${SCHEMA_VERSION}`);
  });
});
