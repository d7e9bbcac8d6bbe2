'use strict';
// Code signing (issue "Trust"): the author's signature of a deployed bundle's manifest, kept with
// the version so that every instance checks it, against its own pinned keys (deploy.trustedKeys),
// before it runs that version. Null for a version deployed without one.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.alterTable('bcms_deployments', (table) => {
    table.jsonb('signature');
  });
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.alterTable('bcms_deployments', (table) => {
    table.dropColumn('signature');
  });
};
