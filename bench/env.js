'use strict';
// Settings the bench scripts read from the environment: a bad value stops the run with its name.

/** A positive number from `process.env[name]`, or `fallback` when unset or empty. */
function positiveNumber(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return value;
}

/** A positive integer from `process.env[name]`, or `fallback` when unset or empty. */
function positiveInteger(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return value;
}

module.exports = { positiveInteger, positiveNumber };
