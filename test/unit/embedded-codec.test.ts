import { expect } from 'chai';
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { ATTACH_MIN_BYTES, Decoder, Encoder } from '../../src/store/embedded/codec.ts';

/** `length` bytes of a pattern that tells one value from another. */
function pattern(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 31 + seed) % 251;
  return bytes;
}

/** Sends what `encoder` holds through a real MessagePort, as the SQLite threads do, and decodes it on the other side. */
function sendAndDecode(encoder: Encoder): Decoder {
  const attachments = encoder.takeAttachments();
  const buffer = encoder.finish();
  const { port1, port2 } = new MessageChannel();
  try {
    if (attachments.length === 0) port1.postMessage(buffer, [buffer]);
    else port1.postMessage([buffer, ...attachments], [buffer, ...attachments]);
    const message = receiveMessageOnPort(port2)?.message as ArrayBuffer | [ArrayBuffer, ...ArrayBuffer[]];
    return message instanceof ArrayBuffer ? new Decoder(message) : new Decoder(message[0], message.slice(1));
  } finally {
    port1.close();
  }
}

describe('the embedded store thread codec', () => {
  it('attaches a large value whose buffer is its own, and copies small values and views into larger buffers', () => {
    const small = pattern(ATTACH_MIN_BYTES - 1, 1);
    const large = pattern(ATTACH_MIN_BYTES, 2);
    const huge = pattern(3 * ATTACH_MIN_BYTES + 5, 3);
    const shared = pattern(4 * ATTACH_MIN_BYTES, 4);
    const view = shared.subarray(ATTACH_MIN_BYTES, 3 * ATTACH_MIN_BYTES);
    const encoder = new Encoder();
    encoder.u32(7);
    for (const value of [small, large, view, huge]) encoder.attach(value);
    encoder.string('end');

    expect(encoder.attachments).to.equal(2);
    // Small and viewed bytes are in the message; the two attached ones are not.
    expect(encoder.length).to.be.below(small.byteLength + view.byteLength + 100);
    expect(encoder.size).to.equal(encoder.length + large.byteLength + huge.byteLength);

    const decoder = sendAndDecode(encoder);
    expect(decoder.u32()).to.equal(7);
    expect(decoder.bytes().equals(pattern(ATTACH_MIN_BYTES - 1, 1))).to.equal(true);
    expect(decoder.bytes().equals(pattern(ATTACH_MIN_BYTES, 2))).to.equal(true);
    expect(decoder.bytes().equals(Buffer.from(shared.buffer, ATTACH_MIN_BYTES, 2 * ATTACH_MIN_BYTES))).to.equal(true);
    expect(decoder.bytes().equals(pattern(3 * ATTACH_MIN_BYTES + 5, 3))).to.equal(true);
    expect(decoder.string()).to.equal('end');
    expect(decoder.done).to.equal(true);
    // Transferred: the sender's values no longer hold their bytes.
    expect([large.byteLength, huge.byteLength, small.byteLength]).to.deep.equal([0, 0, ATTACH_MIN_BYTES - 1]);
  });

  it('drops the attachments of what truncate() takes back, and decodes the rest', () => {
    const encoder = new Encoder();
    encoder.attach(pattern(ATTACH_MIN_BYTES, 1));
    const [length, attachments] = [encoder.length, encoder.attachments];
    encoder.attach(pattern(2 * ATTACH_MIN_BYTES, 2));
    encoder.attach(pattern(ATTACH_MIN_BYTES, 3));
    encoder.truncate(length, attachments);
    expect(encoder.attachments).to.equal(1);
    expect(encoder.size).to.equal(length + ATTACH_MIN_BYTES);
    encoder.attach(pattern(ATTACH_MIN_BYTES + 1, 4));

    const decoder = sendAndDecode(encoder);
    expect(decoder.bytes().equals(pattern(ATTACH_MIN_BYTES, 1))).to.equal(true);
    expect(decoder.bytes().equals(pattern(ATTACH_MIN_BYTES + 1, 4))).to.equal(true);
    expect(decoder.done).to.equal(true);
  });

  it('refuses a value that names an attachment the message does not have', () => {
    const encoder = new Encoder();
    encoder.attach(pattern(ATTACH_MIN_BYTES, 1));
    encoder.takeAttachments();
    const decoder = new Decoder(encoder.finish());
    expect(() => decoder.bytes()).to.throw(RangeError, /attachment/);
  });
});
