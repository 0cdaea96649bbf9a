import { expect } from 'chai';
import type { ServiceProcess } from './service-process.ts';

export interface CrashUnderLoadOptions {
  /** Starts the service (again): the same store each time. */
  readonly start: () => Promise<ServiceProcess>;
  readonly instance: string;
  /** Acknowledged writes after which the service is killed, while the others are in flight. */
  readonly killAfterWrites: number;
  readonly concurrency: number;
}

/**
 * crashUnderLoad proves that an acknowledged write is never lost: it runs a mixed load (writes of
 * new rows, reads of acknowledged ones) against the service, kills it with SIGKILL in the same
 * tick as the Nth write is acknowledged, with requests still in flight, restarts it, and reads
 * back every row whose write got a 2xx. Returns how many writes were acknowledged.
 */
export async function crashUnderLoad(options: CrashUnderLoadOptions): Promise<number> {
  const first = await options.start();
  const call = (service: ServiceProcess, method: string, endpoint: string, body?: unknown) =>
    fetch(`${service.baseUrl}/v1/${options.instance}/${endpoint}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  expect((await call(first, 'POST', 'createTable', { tableName: 'crash', columnFamily: 'cf' })).status).to.equal(201);

  const acknowledged = new Map<string, string>();
  let next = 0;
  let killed = false;
  const worker = async () => {
    while (!killed) {
      const n = next++;
      try {
        if (n % 4 === 3 && acknowledged.size > 0) {
          // A read of a row written before: the load is mixed, as in production.
          const response = await call(first, 'GET', `readCellData?tableName=crash&id=row-${n % acknowledged.size}`);
          await response.arrayBuffer();
          continue;
        }
        const value = `value-${n}-${'x'.repeat(n % 200)}`;
        const response = await call(first, 'POST', 'insertData', {
          tableName: 'crash',
          rowKeyId: `row-${n}`,
          data: [{ columnFamily: 'cf', columnName: 'n', columnValue: value }],
        });
        if (response.status >= 200 && response.status < 300) {
          acknowledged.set(`row-${n}`, value);
          if (acknowledged.size === options.killAfterWrites && !killed) {
            killed = true;
            process.kill(-(first.process.pid ?? 0), 'SIGKILL');
          }
        } else {
          expect.fail(`insertData answered ${response.status} before the kill`);
        }
      } catch (error) {
        if (!killed) throw error; // after the kill, connections fail: those writes were never acknowledged
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  expect(await first.stop('SIGKILL')).to.equal(null); // killed, not exited

  const second = await options.start();
  try {
    const lost: string[] = [];
    for (const [row, value] of acknowledged) {
      const response = await call(second, 'GET', `readCellData?tableName=crash&id=${row}`);
      const body = (await response.json()) as { data?: Array<{ columnValue: string }> };
      if (response.status !== 200 || body.data?.[0]?.columnValue !== value) lost.push(row);
    }
    expect(lost, 'acknowledged writes missing after the restart').to.deep.equal([]);
  } finally {
    await second.stop('SIGKILL');
  }
  return acknowledged.size;
}
