'use strict';
// Deploy rights (issue 23): an API key may carry an expiry, after which every signature it makes
// is refused with 401 KEY_EXPIRED, on every instance (the ledger compares it with the database's
// clock). Null, as every key made before this migration gets, never expires.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.alterTable('bcms_api_keys', (table) => {
    table.timestamp('expires_at', { useTz: true });
  });
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.alterTable('bcms_api_keys', (table) => {
    table.dropColumn('expires_at');
  });
};
