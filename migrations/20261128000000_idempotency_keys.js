'use strict';
// Idempotent retries (issue 23, item 9): a function call with an `Idempotency-Key` claims a row
// here before its handler runs, and leaves the outcome in it (status and body, as answered). The
// same key, caller and body within 24 h gets that outcome again, from any instance on this
// database; the primary key is what keeps a second call from running the handler while the first
// runs. `locked_until` bounds a claim whose instance died (or could not record an outcome): after
// it, a retry may run the handler again. Rows older than 24 h are ignored, and purged.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.createTable('bcms_idempotency_keys', (table) => {
    table.text('caller').notNullable(); // key:<API key id>, user:<JWT subject>, or anonymous
    table.text('function_name').notNullable();
    table.text('key').notNullable(); // the Idempotency-Key, 1-255 printable ASCII characters
    table.text('body_hash').notNullable(); // hex SHA-256 of the raw body
    table.uuid('claim').notNullable(); // the run that holds (or held) it: only that run records the outcome
    table.integer('status'); // null while the first call runs
    table.text('response'); // the answer's body, as sent
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
    table.timestamp('locked_until', { useTz: true }); // while it runs: when a retry may take it over
    table.primary(['caller', 'function_name', 'key']);
    table.index(['created_at'], 'bcms_idempotency_keys_created_at');
  });
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.dropTableIfExists('bcms_idempotency_keys');
};
