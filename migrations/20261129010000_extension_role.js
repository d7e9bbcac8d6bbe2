'use strict';
// Extension code's own database role (docs/deploying.md: the database session is the service's
// alone). Extension queries connect as a login role that may touch the content tables only; this
// table, which only the service may read, keeps that role's name and password. The role itself is
// cluster-wide and is made (where the service's user may make roles) and granted this schema's
// content tables when the service starts (lib/db/extension-role.ts), so that the list of what it
// may touch lives in one place, shared with `bcms-ext db extension-role`.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.createTable('bcms_extension_role', (table) => {
    table.text('role').primary();
    table.text('password'); // null: the role's password is not known here (it was made elsewhere)
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
  });
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.dropTableIfExists('bcms_extension_role');
};
