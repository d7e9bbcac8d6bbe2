'use strict';
// `npm run bench`, content-store rows: findAllByTemplateId for a 1,000-entry template, against a
// hand-written `select ... where template_id = $1` through `pg`, on the Postgres server of
// DATABASE_URL; once with 1,000,000 entries over 1,000 templates, once with 10,000 entries.
// The seeded schemas are kept between runs (seeding a million rows takes a while).

const knexFactory = require('knex');
const { Client } = require('pg');
const { migrate } = require('..');
const { ContentStore } = require('../dist/db/store');
const { createRepository } = require('../dist/db/repository');

const ROUNDS = Number(process.env.BENCH_DB_ROUNDS || 200);
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

const TABLES = [
  { schema: 'bcms_bench_1m', templates: 1000, perTemplate: 1000 },
  { schema: 'bcms_bench_10k', templates: 10, perTemplate: 1000 },
];

async function seed(url, { schema, templates, perTemplate }) {
  const admin = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
  await admin.raw('create schema if not exists ??', [schema]);
  await admin.destroy();
  const knex = knexFactory({ client: 'pg', connection: url, searchPath: [schema], pool: { min: 0, max: 4 } });
  await migrate(knex);
  const [{ count }] = await knex('bcms_entries').count({ count: '*' });
  if (Number(count) !== templates * perTemplate) {
    process.stderr.write(`seeding ${schema}: ${templates} templates x ${perTemplate} entries...\n`);
    await knex.raw('truncate bcms_templates cascade');
    await knex.raw(`insert into bcms_templates (name) select 'template-' || g from generate_series(1, ?) g`, [templates]);
    // One template at a time, in id order, so rows of one template are spread over the table
    // as they would be after months of use, not clustered by a single bulk insert.
    await knex.raw(
      `insert into bcms_entries (template_id, user_id, status, meta, content)
       select t.id, 'user', 'active',
              jsonb_build_array(jsonb_build_object('lng', 'en', 'props', jsonb_build_array(
                jsonb_build_object('id', 'title', 'data', jsonb_build_array('Entry ' || g)),
                jsonb_build_object('id', 'slug', 'data', jsonb_build_array('entry-' || g))))),
              '[]'::jsonb
       from generate_series(1, ?) g cross join bcms_templates t`,
      [perTemplate],
    );
    await knex.raw('analyze bcms_entries');
  }
  const ids = (await knex('bcms_templates').select('id').orderBy('name')).map((row) => row.id);
  return { knex, ids };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

async function measure(url, table) {
  const { knex, ids } = await seed(url, table);
  const repo = createRepository(new ContentStore({ knex, description: table.schema, close: async () => {} }, quiet));
  const client = new Client({ connectionString: url, options: `-c search_path=${table.schema}` });
  await client.connect();
  const handWritten = (id) => client.query('select id, template_id, user_id, status, meta, content, created_at, updated_at from bcms_entries where template_id = $1', [id]);

  const ours = [];
  const theirs = [];
  for (let i = 0; i < ROUNDS + 20; i++) {
    const id = ids[i % ids.length];
    // The template's pages are read once, unmeasured, so both sides meet the same warm cache:
    // otherwise whichever goes first pays for the disk, and the medians of the two land on
    // different sides of a two-humped distribution. Then the two alternate who goes first.
    await handWritten(id);
    const order = i % 2 === 0 ? ['ours', 'theirs'] : ['theirs', 'ours'];
    for (const who of order) {
      const start = process.hrtime.bigint();
      const rows = who === 'ours' ? await repo.entry.findAllByTemplateId(id) : (await handWritten(id)).rows;
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      if (rows.length !== table.perTemplate) throw new Error(`${who}: ${rows.length} rows, expected ${table.perTemplate}`);
      if (i >= 20) (who === 'ours' ? ours : theirs).push(ms); // the first 20 rounds warm up
    }
  }
  await client.end();
  await knex.destroy();
  return { ours: median(ours), theirs: median(theirs) };
}

async function main() {
  const url = process.env.DATABASE_URL;
  if (!url) {
    console.log('\nContent store rows: skipped, DATABASE_URL is not set (they need the Postgres server).');
    return;
  }
  const [large, small] = [await measure(url, TABLES[0]), await measure(url, TABLES[1])];
  const fmt = (n) => n.toFixed(2);
  const rows = [
    ['findAllByTemplateId, 1,000,000 entries', large.ours, large.ours / large.theirs, 'vs hand-written pg', 1.2],
    ['hand-written pg select, 1,000,000 entries', large.theirs, null, '', null],
    ['findAllByTemplateId, 10,000 entries', small.ours, small.ours / small.theirs, 'vs hand-written pg', 1.2],
    ['findAllByTemplateId, 1,000,000 vs 10,000 entries', large.ours, large.ours / small.ours, 'large ÷ small table', 1.5],
  ];
  console.log(`\n| content store (1,000-entry template, median of ${ROUNDS}) | ms | ratio | of | target | met? |`);
  console.log('|---|--:|--:|---|--:|---|');
  for (const [name, ms, ratio, of, target] of rows) {
    const met = target === null ? '—' : ratio <= target ? 'yes' : 'missed';
    console.log(`| ${name} | ${fmt(ms)} | ${ratio === null ? '—' : fmt(ratio)} | ${of} | ${target === null ? '—' : `<= ${target}`} | ${met} |`);
  }
  console.log(
    `\nPostgres server at ${new URL(url).host}. Each round reads the template once unmeasured, then times both ` +
      'sides on the same warm pages, alternating which goes first; ours also sorts oldest first (the hand-written select does not).',
  );
}

main().catch((error) => {
  console.error(`bench (content store) failed: ${error.stack || error}`);
  process.exitCode = 1;
});
