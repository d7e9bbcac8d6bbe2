'use strict';
// `cpu`: a public function that spends about 5 ms of CPU per call (on this project's machine),
// hashing a 4 KiB block CPU_ROUNDS times in a chain. function-cpu loads this very file in the
// registry (in the service's process) and function-cpu-deployed deploys its text as a bundle, so
// both run the same code. Its answer depends on the body, so the runner can check it.
const { createHash } = require('node:crypto');
const { createBcmsFunction } = require('bcms-extensions');

/** 1,100 rounds: 4.2–5.6 ms a call on this project's machine (AMD EPYC, Node 20), measured when chosen. */
const CPU_ROUNDS = 1100;
const BLOCK = Buffer.alloc(4096, 7);

/** The work of one call: sha256 over the block and the previous digest, CPU_ROUNDS times. */
function work(seed) {
  let digest = createHash('sha256').update(seed).digest();
  for (let i = 0; i < CPU_ROUNDS; i++) digest = createHash('sha256').update(BLOCK).update(digest).digest();
  return { rounds: CPU_ROUNDS, digest: digest.toString('hex') };
}

exports.CPU_ROUNDS = CPU_ROUNDS;
exports.work = work;
exports.default = createBcmsFunction(async () => ({
  config: { name: 'cpu', public: true },
  handler: async ({ request }) => work(JSON.stringify(request.body)),
}));
