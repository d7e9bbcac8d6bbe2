'use strict';
// Deployed plugins and functions (issue "CLI and live deploy"): every version sent, the bundle
// itself, who deployed it and when; at most one active version per (kind, name). Instances learn
// of a change through NOTIFY bcms_deployments and load the active versions.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.createTable('bcms_deployments', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.bigIncrements('seq', { primaryKey: false });
    table.text('kind').notNullable(); // plugin | function
    table.text('name').notNullable();
    table.text('project'); // the project it came from: a renamed plugin replaces its old name
    table.text('version').notNullable();
    table.text('sha256').notNullable();
    table.text('code').notNullable();
    table.jsonb('ui'); // { "<path>": "<base64>" } of a plugin's built UI
    table.text('deployed_by').notNullable();
    table.boolean('active').notNullable().defaultTo(false);
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
  });
  await knex.raw(`alter table bcms_deployments add constraint bcms_deployments_kind check (kind in ('plugin', 'function'))`);
  await knex.raw('create unique index bcms_deployments_one_active on bcms_deployments (kind, name) where active');
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.dropTableIfExists('bcms_deployments');
};
