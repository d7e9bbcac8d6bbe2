'use strict';
// Templates and entries (docs/content.md). Ids are UUIDs made by Postgres; nested BCMS data is JSONB.
// created_at defaults to clock_timestamp(), not now(), and `seq` breaks ties: rows added within one
// clock tick (PGlite's clock is coarse) still come back in the order they were added.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.createTable('bcms_templates', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.bigIncrements('seq', { primaryKey: false });
    table.text('name').notNullable().unique();
    table.text('label').notNullable().defaultTo('');
    table.text('desc').notNullable().defaultTo('');
    table.boolean('single_entry').notNullable().defaultTo(false);
    table.jsonb('props').notNullable().defaultTo('[]');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
  });
  await knex.schema.createTable('bcms_entries', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.bigIncrements('seq', { primaryKey: false });
    table.uuid('template_id').notNullable().references('id').inTable('bcms_templates').onDelete('CASCADE');
    table.text('user_id').notNullable().defaultTo('');
    table.text('status').notNullable().defaultTo('');
    table.jsonb('meta').notNullable().defaultTo('[]');
    table.jsonb('content').notNullable().defaultTo('[]');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
    // Serves the foreign key, findAllByTemplateId's filter and its oldest-first order in one index.
    table.index(['template_id', 'created_at', 'seq'], 'bcms_entries_template_id_created_at');
  });
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.dropTableIfExists('bcms_entries');
  await knex.schema.dropTableIfExists('bcms_templates');
};
