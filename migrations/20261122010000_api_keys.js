'use strict';
// API keys for private functions, and the memory of accepted signatures (docs/signed-calls.md,
// "API keys"). A key is bound to one algorithm: an HMAC secret, or a public key.
// What a key signed (the signing string: its date, nonce and digest included) is remembered until
// its Date leaves the clock-skew window, so that a replay is refused by every instance on this
// database; the primary key is what refuses it.

/** @param {import('knex').Knex} knex */
exports.up = async function up(knex) {
  await knex.schema.createTable('bcms_api_keys', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.text('name').notNullable();
    table.text('algorithm').notNullable();
    table.text('secret'); // hmac-sha256: the shared secret, as issued
    table.text('public_key'); // rsa-sha256, ed25519: SPKI PEM
    table.boolean('blocked').notNullable().defaultTo(false);
    table.jsonb('functions').notNullable().defaultTo('[]');
    table.boolean('deploy').notNullable().defaultTo(false);
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.raw('clock_timestamp()'));
  });
  await knex.raw(`
    alter table bcms_api_keys add constraint bcms_api_keys_material check (
      (algorithm = 'hmac-sha256' and secret is not null and public_key is null) or
      (algorithm in ('rsa-sha256', 'ed25519') and secret is null and public_key is not null)
    )`);
  await knex.schema.createTable('bcms_signature_replays', (table) => {
    table.uuid('key_id').notNullable().references('id').inTable('bcms_api_keys').onDelete('CASCADE');
    table.text('signed_hash').notNullable(); // hex SHA-256 of the signing string: short, fixed-size keys
    table.timestamp('expires_at', { useTz: true }).notNullable();
    table.primary(['key_id', 'signed_hash']);
    table.index(['expires_at'], 'bcms_signature_replays_expires_at');
  });
};

/** @param {import('knex').Knex} knex */
exports.down = async function down(knex) {
  await knex.schema.dropTableIfExists('bcms_signature_replays');
  await knex.schema.dropTableIfExists('bcms_api_keys');
};
