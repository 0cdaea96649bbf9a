import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import Joi from 'joi';
import { bounded, deadlineExceeded } from '../../src/store/bounded.ts';
import { credentialsFile, emulatorHost } from '../../src/store/driver-settings.ts';
import { StoreError, familyNotFound, isStoreError, tableExists, tableNotFound } from '../../src/store/errors.ts';

const ref = { instance: 'main', table: 'orders' };

describe('store errors every driver reports', () => {
  it('tableNotFound is a NOT_FOUND of the table, named as the caller gave it', () => {
    const error = tableNotFound(ref);
    expect(error).to.include({ code: 'NOT_FOUND', resource: 'table', resourceName: 'orders', message: 'table main/orders not found' });
  });

  it('tableExists is an ALREADY_EXISTS of the table', () => {
    expect(tableExists(ref)).to.include({ code: 'ALREADY_EXISTS', resource: 'table', resourceName: 'orders', message: 'table main/orders exists' });
  });

  it('familyNotFound is a NOT_FOUND of the column family, naming the table when given', () => {
    expect(familyNotFound('cf')).to.include({ code: 'NOT_FOUND', resource: 'columnFamily', resourceName: 'cf', message: 'column family "cf" not in the table' });
    expect(familyNotFound('cf', ref).message).to.equal('column family "cf" not in table main/orders');
  });
});

describe('bounded: a store call within its deadline and its caller', () => {
  const call = { store: 'test', operation: 'readRows', toStoreError: (error: unknown) => (error instanceof StoreError ? error : new StoreError('INTERNAL', String(error))) };
  const soon = (ms: number) => ({ deadline: Date.now() + ms });
  const never = () => new Promise<never>(() => {});

  it('settles with the value of work that finishes in time', async () => {
    expect(await bounded(soon(1000), call, () => Promise.resolve(7))).to.equal(7);
  });

  it('fails with the driver error of work that fails', async () => {
    const error = await bounded(soon(1000), call, () => Promise.reject(new Error('boom'))).catch((caught: unknown) => caught);
    expect(error).to.include({ code: 'INTERNAL', message: 'Error: boom' });
  });

  it('fails with DEADLINE_EXCEEDED when the work outlasts the deadline, and tells the driver', async () => {
    let timedOut = false;
    const error = await bounded(soon(20), { ...call, onTimeout: () => (timedOut = true) }, never).catch((caught: unknown) => caught);
    expect(error).to.include({ code: 'DEADLINE_EXCEEDED', message: 'test readRows: no answer before the deadline' });
    expect(timedOut).to.equal(true);
  });

  it('fails with the error unreached gives, without onTimeout, when the call cannot have reached the backend', async () => {
    let timedOut = false;
    const unavailable = new StoreError('UNAVAILABLE', 'test readRows: the client did not start before the deadline');
    const error = await bounded(soon(20), { ...call, unreached: () => unavailable, onTimeout: () => (timedOut = true) }, never).catch((caught: unknown) => caught);
    expect(error).to.equal(unavailable);
    expect(timedOut).to.equal(false);
  });

  it('does not start work past its deadline, for a caller gone, or when refused', async () => {
    let started = 0;
    const work = () => {
      started += 1;
      return Promise.resolve(1);
    };
    expect(await bounded({ deadline: Date.now() - 1 }, call, work).catch((caught: unknown) => caught)).to.include({ code: 'DEADLINE_EXCEEDED' });
    expect(await bounded({ ...soon(1000), signal: AbortSignal.abort() }, call, work).catch((caught: unknown) => caught)).to.include({ code: 'DEADLINE_EXCEEDED' });
    const refusal = new StoreError('UNAVAILABLE', 'test readRows: unreachable');
    expect(await bounded(soon(1000), { ...call, refuse: () => refusal }, work).catch((caught: unknown) => caught)).to.equal(refusal);
    expect(started).to.equal(0);
  });

  it('fails as callerGone as soon as the caller goes', async () => {
    const controller = new AbortController();
    const pending = bounded({ ...soon(10_000), signal: controller.signal }, call, never).catch((caught: unknown) => caught);
    controller.abort();
    const error = await pending;
    expect(isStoreError(error, 'DEADLINE_EXCEEDED')).to.equal(true);
    expect((error as StoreError).message).to.equal('cancelled: the caller disconnected');
  });

  it('words a missed deadline with the store and the operation', () => {
    expect(deadlineExceeded('spanner', 'mutateRow')).to.include({ code: 'DEADLINE_EXCEEDED', message: 'spanner mutateRow: no answer before the deadline' });
  });
});

describe('driver settings several drivers share', () => {
  const settings = Joi.object({ emulatorHost, credentialsFile });
  const file = join(tmpdir(), `kvcrud-credentials-${process.pid}.json`);
  before(() => writeFileSync(file, '{}'));
  after(() => rmSync(file, { force: true }));

  it('takes an emulator as host:port and refuses anything else', () => {
    expect(settings.validate({ emulatorHost: ' localhost:8086 ' }).value).to.deep.equal({ emulatorHost: 'localhost:8086' });
    expect(settings.validate({ emulatorHost: 'localhost' }).error?.message).to.equal('"emulatorHost" must be host:port, got "localhost"');
  });

  it('keeps a readable credentials file, and refuses one that cannot be read', () => {
    expect(settings.validate({ credentialsFile: file }).value).to.deep.equal({ credentialsFile: file });
    expect(settings.validate({ credentialsFile: '/nonexistent/key.json' }).error?.message).to.equal('"credentialsFile" file "/nonexistent/key.json" cannot be read');
  });

  it('neither checks nor keeps the credentials file beside an emulator', () => {
    expect(settings.validate({ emulatorHost: 'localhost:8086', credentialsFile: '/nonexistent/key.json' }).value).to.deep.equal({ emulatorHost: 'localhost:8086' });
  });
});
