import { expect } from 'chai';
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { ATTACH_MIN_BYTES, COPY_PIECE_BYTES, Decoder, Encoder } from '../../src/store/embedded/codec.ts';
import { requestsOf, writeHeader } from '../../src/store/embedded/protocol.ts';

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
  it('gives a tall value the room it needs, not up to twice it, and sends it uncut', () => {
    const encoder = new Encoder();
    encoder.u32(7);
    const value = pattern(8 * 1024 * 1024, 3);
    encoder.bytes(value);
    const buffer = encoder.finishPadded();
    // Room for the value and a sixteenth more; cutting off that sixteenth would copy the message.
    expect(buffer.byteLength).to.be.above(4 + 4 + value.length);
    expect(buffer.byteLength).to.be.at.most(Math.ceil((4 + 4 + value.length) * (1 + 1 / 16)));
    const decoder = new Decoder(buffer);
    expect(decoder.u32()).to.equal(7);
    expect(Buffer.from(decoder.bytes()).equals(Buffer.from(value))).to.equal(true);
  });

  it('copies a tall value a piece at a time, yielding between pieces, into what bytes() would write', () => {
    for (const length of [COPY_PIECE_BYTES, COPY_PIECE_BYTES + 1, 3 * COPY_PIECE_BYTES - 1]) {
      const value = pattern(length, length % 7);
      const inPieces = new Encoder();
      inPieces.u32(7);
      const yields = [...inPieces.bytesInPieces(value)].length;
      inPieces.u32(9);
      expect(yields, `yields for ${length} bytes`).to.equal(Math.ceil(length / COPY_PIECE_BYTES) - 1);
      const whole = new Encoder();
      whole.u32(7);
      whole.bytes(value);
      whole.u32(9);
      expect(Buffer.from(inPieces.finish()).equals(Buffer.from(whole.finish())), `${length} bytes`).to.equal(true);
    }
  });

  it('cuts a message whose unused room is more than an eighth of it', () => {
    const encoder = new Encoder(1024);
    encoder.u32(1);
    expect(encoder.finishPadded().byteLength).to.equal(4);
  });

  it('reads the requests of a message up to its end, or up to the zeros left after them', () => {
    for (const room of [0, 3, 16, 17, 200]) {
      const encoder = new Encoder();
      for (const [id, payload] of [
        [1, pattern(5, 1)],
        [0x7fff_ffff, pattern(300, 2)],
      ] as const) {
        const lengthAt = writeHeader(encoder, id, 5, 1234.5);
        encoder.bytes(payload);
        encoder.u32At(lengthAt, encoder.length - lengthAt - 4);
      }
      const encoded = new Uint8Array(encoder.finish());
      const padded = new Uint8Array(encoded.length + room);
      padded.set(encoded);
      const requests = requestsOf(padded.buffer);
      expect(requests.map(({ id, kind, deadline }) => ({ id, kind, deadline })), `with ${room} bytes of zeros`).to.deep.equal([
        { id: 1, kind: 5, deadline: 1234.5 },
        { id: 0x7fff_ffff, kind: 5, deadline: 1234.5 },
      ]);
      expect(Buffer.from((requests[1]?.decoder as Decoder).bytes()).equals(Buffer.from(pattern(300, 2)))).to.equal(true);
    }
  });
});
