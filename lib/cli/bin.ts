#!/usr/bin/env node
import { portCommand } from '../bcms/port/port'; // BCMS layer
import { main } from './main';
import { addCommand } from './main'; // BCMS layer

addCommand(portCommand); // BCMS layer

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`bcms-ext: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
