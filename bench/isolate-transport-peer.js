'use strict';
// The far end of bench/isolate-transport.js: a worker thread or a child process that says it is up
// (its first line of code ran), loads dist/api.js (what an isolate's extension code requires as
// `bcms-extensions`) and says so, then answers every call with a plugin answer, as an isolate does.

const { isMainThread, parentPort } = require('node:worker_threads');

const send = isMainThread ? (message) => process.send(message) : (message) => parentPort.postMessage(message);
send({ t: 'up' });
const started = performance.now();
require('../dist/api.js');
send({ t: 'ready', loadMs: performance.now() - started });

// What a plugin handler's `{ message: 'Hello' }` comes back as (lib/isolate/protocol.ts WireAnswer).
const answer = { status: 200, headers: [['x-bench', 'isolate-transport']], json: '{"message":"Hello"}' };
const receive = (message) => {
  if (message.t === 'call') send({ t: 'done', id: message.id, answer });
};
if (isMainThread) {
  process.on('message', receive);
  process.on('disconnect', () => process.exit(0));
} else {
  parentPort.on('message', receive);
}
