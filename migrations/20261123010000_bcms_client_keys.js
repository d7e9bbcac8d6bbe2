'use strict';
// API keys that also accept the BCMS client's signed calls (issue 15; docs/signed-calls.md, "Calling
// from the BCMS client"): query parameters key, nonce, timestamp and an HMAC-SHA256 over them and the body.
// Off by default, since that scheme signs neither the method nor the path. Only a key with a shared
// secret (hmac-sha256) can compute that HMAC, and the database refuses any other.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.alterTable('bcms_api_keys', (table) => {
    table.boolean('bcms_client').notNullable().defaultTo(false);
  });
  await knex.raw(`alter table bcms_api_keys add constraint bcms_api_keys_bcms_client_hmac check (not bcms_client or algorithm = 'hmac-sha256')`);
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.raw('alter table bcms_api_keys drop constraint if exists bcms_api_keys_bcms_client_hmac');
  await knex.schema.alterTable('bcms_api_keys', (table) => {
    table.dropColumn('bcms_client');
  });
};
