'use strict';
// Isolation (issue "Deployed code runs isolated"): an instance that cannot load a deployment says
// why here, so `rollback` refuses a version that failed to load and `bcms-ext list` shows it.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.alterTable('bcms_deployments', (table) => {
    table.text('load_error');
  });
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.alterTable('bcms_deployments', (table) => {
    table.dropColumn('load_error');
  });
};
