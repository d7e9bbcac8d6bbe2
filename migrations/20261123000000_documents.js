'use strict';
// Plugin-owned documents (docs/porting.md: createFSDBRepository,
// createMongoDBCachedRepository): every plugin collection in one table, one JSONB document per row,
// keyed by (collection, id), so that every instance on the database reads and writes the same data.
// `seq` keeps insertion order (FSDB's and Mongo's natural order). Equality filters on fields run as
// jsonpath equality and containment (`doc @@ ...`, `doc @> ...`), which the GIN index serves;
// comparisons and `$exists` are filtered within the collection's rows, which the (collection, seq)
// index finds.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.createTable('bcms_documents', (table) => {
    table.text('collection').notNullable();
    table.text('id').notNullable();
    table.bigIncrements('seq', { primaryKey: false });
    table.jsonb('doc').notNullable();
    table.primary(['collection', 'id']);
    table.index(['collection', 'seq'], 'bcms_documents_collection_seq');
  });
  // jsonb_path_ops: smaller and faster than the default operator class, and containment is all we ask of it.
  await knex.raw('create index bcms_documents_doc on bcms_documents using gin (doc jsonb_path_ops)');
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.dropTableIfExists('bcms_documents');
};
