'use strict';
// BCMS's ids and cids (docs/porting.md: BCMSRepo). Ids become text, so that BCMS's
// 24-hex ObjectIds are stored and found as they are; rows keep their ids (a UUID's text is the
// UUID), new rows made without an id still get a UUID, and the foreign key and the template index
// are made again on the text columns. `cid` is BCMS's short id, a hex counter (entries and
// templates have one counter each, as BCMS's id counters): existing rows get theirs from `seq`, in
// the order they were added. Templates also get `user_id`, as BCMS's carry the author.

const CID = {
  bcms_templates: 'bcms_templates_cid_seq',
  bcms_entries: 'bcms_entries_cid_seq',
};

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.raw('alter table bcms_entries drop constraint if exists bcms_entries_template_id_foreign');
  await knex.raw('alter table bcms_templates alter column id drop default, alter column id type text using id::text');
  await knex.raw('alter table bcms_templates alter column id set default gen_random_uuid()::text');
  await knex.raw('alter table bcms_entries alter column id drop default, alter column id type text using id::text');
  await knex.raw('alter table bcms_entries alter column id set default gen_random_uuid()::text');
  // The index on (template_id, created_at, seq) is rebuilt by Postgres with the column's new type.
  await knex.raw('alter table bcms_entries alter column template_id type text using template_id::text');
  await knex.raw('alter table bcms_entries add constraint bcms_entries_template_id_foreign foreign key (template_id) references bcms_templates (id) on delete cascade');
  for (const [table, sequence] of Object.entries(CID)) {
    await knex.raw('create sequence ??', [sequence]);
    await knex.raw('alter table ?? add column cid text', [table]);
    await knex.raw('update ?? set cid = to_hex(seq)', [table]);
    await knex.raw(`select setval(?, greatest((select max(seq) from ??), 1), (select count(*) > 0 from ??))`, [sequence, table, table]);
    await knex.raw(`alter table ?? alter column cid set default to_hex(nextval('${sequence}')), alter column cid set not null`, [table]);
  }
  await knex.raw(`alter table bcms_templates add column user_id text not null default ''`);
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.raw('alter table bcms_templates drop column user_id');
  for (const [table, sequence] of Object.entries(CID)) {
    await knex.raw('alter table ?? drop column cid', [table]);
    await knex.raw('drop sequence ??', [sequence]);
  }
  // Rows whose ids are not UUIDs cannot go back: the cast refuses them, and the migration with it.
  await knex.raw('alter table bcms_entries drop constraint bcms_entries_template_id_foreign');
  await knex.raw('alter table bcms_entries alter column template_id type uuid using template_id::uuid');
  await knex.raw('alter table bcms_entries alter column id drop default, alter column id type uuid using id::uuid');
  await knex.raw('alter table bcms_entries alter column id set default gen_random_uuid()');
  await knex.raw('alter table bcms_templates alter column id drop default, alter column id type uuid using id::uuid');
  await knex.raw('alter table bcms_templates alter column id set default gen_random_uuid()');
  await knex.raw('alter table bcms_entries add constraint bcms_entries_template_id_foreign foreign key (template_id) references bcms_templates (id) on delete cascade');
};
