import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Channel, type ChannelOptions } from '../../lib/isolate/channel';
import { until as waitUntil } from '../support/wait';

// The service's channel to an isolate (lib/isolate/channel.ts), on a real Unix socket pair as the
// isolate's fd 3 is one: frames arrive whole and in order however the bytes are cut; a frame past
// the cap, or one that is not JSON, is a fault on its header, before it is kept; a side that sends
// faster than the receiver's busy budget is read more slowly, and nothing it sent is lost.
// (The same through HTTP, with an isolate writing on its fd 3: answers-and-headers.test.ts.)

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-channel-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Two connected sockets: the receiver's end and the sender's. */
async function socketPair(): Promise<[net.Socket, net.Socket]> {
  const file = path.join(dir, `${Math.random().toString(36).slice(2)}.sock`);
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(file, resolve));
  const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
  const sender = net.connect(file);
  const receiver = await accepted;
  await new Promise<void>((resolve) => (sender.connecting ? sender.once('connect', () => resolve()) : resolve()));
  server.close();
  return [receiver, sender];
}

const frame = (text: string): Buffer => {
  const body = Buffer.from(text);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  return Buffer.concat([head, body]);
};

/** A receiving channel that records what it got, and its fault. */
function receiving(socket: net.Socket, options: Partial<ChannelOptions<unknown>> = {}) {
  const got: unknown[] = [];
  const faults: string[] = [];
  let closed = false;
  const channel = new Channel<unknown, unknown>(socket, {
    maxFrameBytes: 1024,
    receive: (message) => got.push(message),
    fault: (reason) => faults.push(reason),
    closed: () => (closed = true),
    ...options,
  });
  return { channel, got, faults, isClosed: () => closed };
}

/** Until `check` holds, looking every 10 ms, with no limit of its own (Jest's is the one). */
const until = (check: () => boolean): Promise<void> => waitUntil(check, 10);

test('frames cut anywhere (a header split in two, several in one read) arrive whole and in order', async () => {
  const [receiver, sender] = await socketPair();
  const end = receiving(receiver);
  const messages = Array.from({ length: 50 }, (_, i) => ({ i, text: 'é'.repeat(i * 7) }));
  const bytes = Buffer.concat(messages.map((message) => frame(JSON.stringify(message))));
  // Pieces of 1 to 13 bytes, each its own write and a turn apart: headers and bodies cut everywhere.
  for (let at = 0, size = 1; at < bytes.length; at += size, size = (size % 13) + 1) {
    sender.write(bytes.subarray(at, at + size));
    await new Promise((resolve) => setImmediate(resolve));
  }
  await until(() => end.got.length === messages.length);
  expect(end.got).toEqual(messages);
  expect(end.faults).toEqual([]);
  sender.destroy();
});

test('a frame whose header is past the cap is a fault before its body arrives, and the channel is closed', async () => {
  const [receiver, sender] = await socketPair();
  const end = receiving(receiver);
  sender.write(Buffer.concat([frame('"fine"'), Buffer.from([0x00, 0x00, 0x04, 0x01]), Buffer.from('only the start')]));
  await until(() => end.faults.length > 0 && end.isClosed());
  expect(end.got).toEqual(['fine']);
  expect(end.faults).toEqual(['it sent a message of 1025 bytes, past the cap of 1024']);
  await until(() => sender.destroyed || sender.readableEnded);
  sender.destroy();
});

test('a frame that is not JSON is a fault; nothing after it is read', async () => {
  const [receiver, sender] = await socketPair();
  const end = receiving(receiver);
  sender.write(Buffer.concat([frame('{"a":1}'), frame('{not json'), frame('{"b":2}')]));
  await until(() => end.faults.length > 0);
  expect(end.got).toEqual([{ a: 1 }]);
  expect(end.faults).toEqual(['it sent a message that is not JSON']);
  sender.destroy();
});

test('a sender past the busy budget is read more slowly, and every frame still arrives, in order', async () => {
  const [receiver, sender] = await socketPair();
  // No time at all a second: reading rests after every frame, until the second is over.
  const end = receiving(receiver, { busyMsPerSecond: 0 });
  sender.write(Buffer.concat([frame('1'), frame('2'), frame('3')]));
  await until(() => end.got.length === 3);
  expect(end.got).toEqual([1, 2, 3]);
  expect(end.channel.rests).toBeGreaterThanOrEqual(2);
  expect(end.faults).toEqual([]);
  sender.destroy();
});

test('a receiver that leaves more than the backlog cap unread is a fault of the sender side', async () => {
  const [receiver, sender] = await socketPair();
  receiver.pause();
  const faults: string[] = [];
  const out = new Channel<unknown, string>(sender, { maxFrameBytes: 1024, maxBacklogBytes: 64 * 1024, receive: () => {}, fault: (reason) => faults.push(reason) });
  for (let i = 0; i < 64 && faults.length === 0; i++) out.send('x'.repeat(1024 * 1024));
  expect(faults).toHaveLength(1);
  expect(faults[0]).toMatch(/^it left \d+ bytes unread, past the cap of 65536$/);
  receiver.destroy();
});

test('a message over the limit given to encode is not sent', async () => {
  const [receiver, sender] = await socketPair();
  const out = new Channel<unknown, string>(sender, { maxFrameBytes: 1024, receive: () => {}, fault: () => {} });
  expect(out.encode('x'.repeat(100), 50)).toBeUndefined();
  expect(out.send('x'.repeat(100), 50)).toBe(false);
  expect(out.encode('xy', 50)?.toString('utf8', 4)).toBe('"xy"');
  receiver.destroy();
  sender.destroy();
});
