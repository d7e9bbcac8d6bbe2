'use strict';
// The far end of bench/isolate-transport.js: a worker thread or a child process that says it is up
// (its first line of code ran), loads dist/api.js (what an isolate's extension code requires as
// `bcms-extensions`) and says so, then answers every call with a plugin answer, as an isolate does.

const { isMainThread, parentPort } = require('node:worker_threads');

// `framed`: a child whose channel is lib/isolate/channel.ts on the pipe at fd 3, as an isolate's is.
const framed = isMainThread && process.argv[2] === 'framed' ? openFramedChannel() : undefined;
const send = framed !== undefined ? (message) => framed.send(message) : isMainThread ? (message) => process.send(message) : (message) => parentPort.postMessage(message);
send({ t: 'up' });
const started = performance.now();
require('../dist/api.js');
send({ t: 'ready', loadMs: performance.now() - started });

// What a plugin handler's `{ message: 'Hello' }` comes back as (lib/isolate/protocol.ts WireAnswer).
const answer = { status: 200, headers: [['x-bench', 'isolate-transport']], json: '{"message":"Hello"}' };
const receive = (message) => {
  if (message.t === 'call') send({ t: 'done', id: message.id, answer });
};
if (framed !== undefined) {
  framed.receive = receive;
} else if (isMainThread) {
  process.on('message', receive);
  process.on('disconnect', () => process.exit(0));
} else {
  parentPort.on('message', receive);
}

function openFramedChannel() {
  const net = require('node:net');
  const { Channel, CHANNEL_FD, MAX_FRAME_BYTES } = require('../dist/isolate/channel.js');
  const end = { receive: () => {} };
  const channel = new Channel(new net.Socket({ fd: CHANNEL_FD, readable: true, writable: true }), {
    maxFrameBytes: MAX_FRAME_BYTES,
    receive: (message) => end.receive(message),
    fault: () => process.exit(1),
    closed: () => process.exit(0),
  });
  end.send = (message) => channel.send(message);
  return end;
}
