'use strict';
// API keys that list the plugins they may call (issue 14; docs/porting.md:
// BCMSRouteProtection.createJwtApiPreRequestHandler accepts an API-key signature when the key's
// access lists the plugin, as BCMS's `access.plugins` does). A JSON array of plugin names, as
// `functions` is; none by default, so a key made before this migration may call no plugin.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.alterTable('bcms_api_keys', (table) => {
    table.jsonb('plugins').notNullable().defaultTo('[]');
  });
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.alterTable('bcms_api_keys', (table) => {
    table.dropColumn('plugins');
  });
};
