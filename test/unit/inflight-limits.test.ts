import { expect } from 'chai';
import { perCallerBoundFrom } from '../../src/config.ts';
import { InflightLimits } from '../../src/http/admission/inflight-limits.ts';

describe('InflightLimits', () => {
  it('lets one key take every slot but the last eighth while the others leave them, then only keys within their share', () => {
    const limits = new InflightLimits({ total: 16, perKey: 8, perKeyFrom: perCallerBoundFrom(16) });
    expect(limits.perKeyFrom).to.equal(14);
    const busy = Array.from({ length: 16 }, () => limits.acquire('busy'));
    // 14 in flight: the busy key, over its share of 8, gets no more.
    expect(busy.filter((refusal) => refusal === undefined)).to.have.length(14);
    expect(busy.slice(14)).to.deep.equal(['key', 'key']);
    // Another key, within its share, gets the last two; then the service is full.
    expect([limits.acquire('other'), limits.acquire('other'), limits.acquire('other')]).to.deep.equal([undefined, undefined, 'total']);
    // A slot the busy key gives back goes to a key within its share, not back to the busy key.
    limits.release('busy');
    expect(limits.acquire('busy')).to.equal('key');
    expect(limits.acquire('third')).to.equal(undefined);
  });

  it('applies the share at once with perKeyFrom 0 (the credential-check budget)', () => {
    const limits = new InflightLimits({ total: 16, perKey: 4 });
    expect(Array.from({ length: 5 }, () => limits.acquire('address'))).to.deep.equal([undefined, undefined, undefined, undefined, 'key']);
  });

  it('keeps the share from the start when MAX_INFLIGHT is 1', () => {
    expect(perCallerBoundFrom(1)).to.equal(0);
    expect(perCallerBoundFrom(256)).to.equal(224);
  });
});
