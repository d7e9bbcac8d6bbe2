'use strict';
// Events and jobs (docs/events-and-jobs.md): a functions project's src/events/*.ts and
// src/jobs/*.ts deploy beside its functions, each a deployment of kind `event` or `job`, stored,
// listed, undeployed and rolled back as functions are.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.raw('alter table bcms_deployments drop constraint bcms_deployments_kind');
  await knex.raw(`alter table bcms_deployments add constraint bcms_deployments_kind check (kind in ('plugin', 'function', 'event', 'job'))`);
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  // Their versions go with the kinds: the narrower check would refuse the rows.
  await knex('bcms_deployments').whereIn('kind', ['event', 'job']).delete();
  await knex.raw('alter table bcms_deployments drop constraint bcms_deployments_kind');
  await knex.raw(`alter table bcms_deployments add constraint bcms_deployments_kind check (kind in ('plugin', 'function'))`);
};
