'use strict';
// Events and jobs (docs/events-and-jobs.md). Events are an outbox: a write of an entry or a
// template records a delivery of its event per matching handler, in the write's own transaction
// (a trigger, so that every path is covered: the SDK's routes, the host's store, extension code's
// own session, plain SQL). Instances then claim deliveries with FOR UPDATE SKIP LOCKED, one
// document's in commit order. Job runs are kept per (job, tick): the instance whose insert of a
// tick wins runs it; the others find the row and do nothing.

const UNFINISHED = "status in ('pending', 'retrying', 'running')";
/** The largest payload an emit takes, in bytes of its JSON (lib/events/emit.ts says so first). */
const EMIT_PAYLOAD_LIMIT = 1024 * 1024;
/**
 * The handlers an event of (p_scope, p_method) is delivered to: active (a registry one named by an
 * instance within the hour), of its scope or ALL, of its method or ALL.
 */
const MATCHING = `where h.active and (h.source = 'deployed' or h.seen_at > clock_timestamp() - interval '1 hour')
  and (h.scope = 'ALL' or h.scope = p_scope) and (h.method = 'ALL' or h.method = p_method)`;
/** At most one NOTIFY in this many milliseconds. */
const NOTIFY_GAP_MS = 10;

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.createTable('bcms_event_handlers', (table) => {
    table.text('name').primary();
    table.text('scope').notNullable();
    table.text('method').notNullable();
    table.text('source').notNullable(); // 'registry' | 'deployed'
    table.boolean('active').notNullable().defaultTo(true);
    // A registry handler is kept by the instances that serve it; one no instance has named for an hour is given no more deliveries.
    table.timestamp('seen_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
  });
  // An event is its deliveries, one a matching handler, each with the event (a write then adds one
  // row, not two): the deliveries of one event share its number.
  await knex.raw('create sequence bcms_event_ids');
  await knex.schema.createTable('bcms_event_deliveries', (table) => {
    table.bigIncrements('id');
    table.bigInteger('event_id').notNullable();
    table.text('handler').notNullable();
    table.text('scope').notNullable();
    table.text('method').notNullable();
    table.text('doc'); // `ENTRY:<id>`, `TEMPLATE:<id>`; null for a custom emit
    table.jsonb('payload');
    table.text('status').notNullable().defaultTo('pending'); // pending | running | retrying | delivered | failed
    table.integer('attempts').notNullable().defaultTo(0);
    table.timestamp('run_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
    table.timestamp('lease_until', { useTz: true });
    table.text('instance');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
    table.timestamp('started_at', { useTz: true });
    table.timestamp('finished_at', { useTz: true });
    table.integer('duration_ms');
    table.text('error');
    // Few indexes: each is written again at every claim and outcome (the listing reads by id, newest first).
  });
  await knex.raw(`create index bcms_event_deliveries_due on bcms_event_deliveries (run_at, id) where ${UNFINISHED}`);
  await knex.raw(`create index bcms_event_deliveries_doc on bcms_event_deliveries (handler, doc, id) where ${UNFINISHED}`);

  await knex.schema.createTable('bcms_jobs', (table) => {
    table.text('name').primary();
    table.text('cron').notNullable();
    table.text('source').notNullable();
    table.boolean('active').notNullable().defaultTo(true);
    table.timestamp('seen_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
  });
  await knex.schema.createTable('bcms_job_runs', (table) => {
    table.bigIncrements('id');
    table.text('job').notNullable();
    table.timestamp('tick_at', { useTz: true }).notNullable();
    table.text('status').notNullable(); // running | succeeded | failed | timed_out | skipped
    table.text('instance');
    table.timestamp('started_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
    table.timestamp('finished_at', { useTz: true });
    table.timestamp('lease_until', { useTz: true });
    table.integer('duration_ms');
    table.text('error');
    table.unique(['job', 'tick_at'], { indexName: 'bcms_job_runs_job_tick' });
  });
  await knex.raw("create index bcms_job_runs_running on bcms_job_runs (job) where status = 'running'");

  // When the last notification went out (one row; unlogged: lost in a crash, it is made again).
  await knex.raw('create unlogged table bcms_event_notified (at timestamptz not null)');

  // The schema the tables are in now: the functions run with it, whoever calls them (extension
  // code's role has no rights on these tables; the functions run as their owner).
  const [{ schema }] = (await knex.raw('select current_schema() as schema')).rows;
  const searchPath = `set search_path = "${schema.replace(/"/g, '""')}", pg_temp`;
  await knex.raw(`
    create function bcms_record_event(p_scope text, p_method text, p_doc text, p_payload jsonb) returns void
    language plpgsql security definer ${searchPath} as $$
    begin
      -- The event's number is taken once (a CTE with a volatile function is run once, not inlined); a number an event with no handler took is a gap, which does no harm.
      with event as (select nextval('bcms_event_ids') as id)
      insert into bcms_event_deliveries (event_id, handler, scope, method, doc, payload)
        select event.id, h.name, p_scope, p_method, p_doc, p_payload from bcms_event_handlers h cross join event ${MATCHING};
      if not found then
        return;
      end if;
      -- NOTIFY serializes the commits of the transactions that send it (Postgres takes one lock
      -- for them all at commit), and wakes every listening session of the database: one
      -- notification in ${NOTIFY_GAP_MS} ms, from one transaction at a time, is enough to wake every instance,
      -- which then claims what is due, this write's included, and looks again every 20 ms while it
      -- finds work (a poll every second in any case).
      if not exists (select 1 from bcms_event_notified where at > clock_timestamp() - interval '${NOTIFY_GAP_MS} milliseconds')
         and pg_try_advisory_xact_lock(hashtext('bcms_events:' || current_schema())) then
        update bcms_event_notified set at = clock_timestamp();
        if not found then
          insert into bcms_event_notified (at) values (clock_timestamp());
        end if;
        perform pg_notify('bcms_events', '');
      end if;
    end $$`);
  // The writes' own: nobody else may record an ENTRY or TEMPLATE event (extension code's role would
  // otherwise forge one, or queue one ahead of a real document's).
  await knex.raw('revoke execute on function bcms_record_event(text, text, text, jsonb) from public');
  // What `useBcmsEventManager().emit` calls, extension code's session included: an event of a scope
  // no write fires, with no document, of at most 1 MB.
  await knex.raw(`
    create function bcms_emit_event(p_scope text, p_method text, p_payload jsonb) returns void
    language plpgsql security definer ${searchPath} as $$
    begin
      if p_scope is null or p_scope = '' or length(p_scope) > 200 or p_method is null or p_method = '' or length(p_method) > 200 then
        raise exception 'bcms_emit_event: scope and method must be strings of 1 to 200 characters' using errcode = '22023';
      end if;
      if p_scope in ('ENTRY', 'TEMPLATE', 'ALL') then
        raise exception 'bcms_emit_event: % events are fired by the writes themselves; emit a scope of your own', p_scope using errcode = '22023';
      end if;
      if octet_length(p_payload::text) > ${EMIT_PAYLOAD_LIMIT} then
        raise exception 'bcms_emit_event: the payload is larger than 1 MB' using errcode = '22023';
      end if;
      perform bcms_record_event(p_scope, p_method, null, p_payload);
    end $$`);
  await knex.raw(`
    create function bcms_record_write() returns trigger
    language plpgsql security definer ${searchPath} as $$
    declare
      row_data jsonb;
    begin
      if tg_op = 'DELETE' then row_data := to_jsonb(old); else row_data := to_jsonb(new); end if;
      perform bcms_record_event(
        tg_argv[0],
        case tg_op when 'INSERT' then 'ADD' when 'UPDATE' then 'UPDATE' else 'DELETE' end,
        tg_argv[0] || ':' || (row_data ->> 'id'),
        row_data);
      return null;
    end $$`);
  await knex.raw("create trigger bcms_entries_event after insert or update or delete on bcms_entries for each row execute function bcms_record_write('ENTRY')");
  await knex.raw("create trigger bcms_templates_event after insert or update or delete on bcms_templates for each row execute function bcms_record_write('TEMPLATE')");
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.raw('drop trigger if exists bcms_entries_event on bcms_entries');
  await knex.raw('drop trigger if exists bcms_templates_event on bcms_templates');
  await knex.raw('drop function if exists bcms_record_write()');
  await knex.raw('drop function if exists bcms_emit_event(text, text, jsonb)');
  await knex.raw('drop function if exists bcms_record_event(text, text, text, jsonb)');
  for (const table of ['bcms_event_notified', 'bcms_job_runs', 'bcms_jobs', 'bcms_event_deliveries', 'bcms_event_handlers']) await knex.schema.dropTableIfExists(table);
  await knex.raw('drop sequence if exists bcms_event_ids');
};
