#!/usr/bin/env node
import { portCommand } from '../bcms/port/port'; // BCMS layer
import { main } from './main';
import { addCommand } from './main'; // BCMS layer

addCommand(portCommand); // BCMS layer

// Output piped into a reader that stops early (| head, | jq on a closed pipe) ends the command quietly.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`bcms-ext: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
