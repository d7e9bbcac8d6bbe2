'use strict';
// Rate limits of function calls (the `rateLimit` option): one row per (kind, subject, window),
// counted by one atomic upsert per call, so that every instance on this database shares the count.
// `kind` is `key` (an API key or a JWT's user) or `ip`; `window_start` the start of the fixed
// window by the database's clock; `expires_at` its end, after which the row is only purged.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.createTable('bcms_rate_limits', (table) => {
    table.text('kind').notNullable();
    table.text('subject').notNullable();
    table.timestamp('window_start', { useTz: true }).notNullable();
    table.integer('points').notNullable();
    table.timestamp('expires_at', { useTz: true }).notNullable();
    table.primary(['kind', 'subject', 'window_start']);
    table.index(['expires_at'], 'bcms_rate_limits_expires_at');
  });
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.dropTableIfExists('bcms_rate_limits');
};
