'use strict';
// The example CMS's own tables (users, settings) and its demo content, created on first start and
// left as they are afterwards: every step checks before it writes, so a restart adds nothing.
const { randomBytes, randomUUID, scrypt, scryptSync, timingSafeEqual } = require('node:crypto');
const { promisify } = require('node:util');
const { migrate } = require('bcms-extensions');

/** Fixed, as the BCMS docs hard-code a template id in their example function. */
const BLOG_TEMPLATE_ID = '6f1c0b7b-a5f9-4d5f-8a4e-7c52a1b2c3d4';
const SUBMISSIONS_TEMPLATE = 'form-submissions';

const ALL = [{ name: 'READ' }, { name: 'WRITE' }, { name: 'DELETE' }, { name: 'EXECUTE' }];
// The admin is SUDO too: only a SUDO role holding WRITE may create deploy keys over HTTP. ADMIN
// stays first: BCMS plugin UIs read the user's first role (user.roles[0].name === ADMIN).
const ADMIN_ROLES = [
  { name: 'ADMIN', permissions: ALL },
  { name: 'SUDO', permissions: ALL },
];
const DEMO_USERS = [
  { key: 'admin', roles: ADMIN_ROLES },
  { key: 'reader', email: 'reader@example.com', roles: [{ name: 'USER', permissions: [{ name: 'READ' }] }] },
];

const BLOG_POSTS = [
  ['Hello, world', 'The first post of the example CMS.'],
  ['Plugins and functions', 'Both mount next to the routes the CMS already had.'],
  ['Content through the repository', 'Handlers read entries with findAllByTemplateId.'],
];

/** Async, on libuv's threads: the two demo users' hashes are made at once, not one after the other on a first start. */
async function hashPassword(password) {
  const salt = randomBytes(16);
  return `scrypt:${salt.toString('hex')}:${(await promisify(scrypt)(password, salt, 32)).toString('hex')}`;
}

function verifyPassword(password, stored) {
  const [, salt, hash] = String(stored).split(':');
  if (!salt || !hash) return false;
  const actual = scryptSync(String(password), Buffer.from(salt, 'hex'), 32);
  return timingSafeEqual(actual, Buffer.from(hash, 'hex'));
}

async function createHostTables(knex) {
  if (!(await knex.schema.hasTable('example_users'))) {
    await knex.schema.createTable('example_users', (table) => {
      table.uuid('id').primary();
      table.text('email').notNullable().unique();
      table.text('password_hash').notNullable();
      table.jsonb('roles').notNullable();
    });
  }
  if (!(await knex.schema.hasTable('example_settings'))) {
    await knex.schema.createTable('example_settings', (table) => {
      table.text('key').primary();
      table.text('value').notNullable();
    });
  }
}

/** A setting made once and kept (the JWT secret: tokens stay valid across restarts). */
async function setting(knex, key, make) {
  const row = await knex('example_settings').where({ key }).first();
  if (row) return row.value;
  const value = make();
  await knex('example_settings').insert({ key, value }).onConflict('key').ignore();
  return (await knex('example_settings').where({ key }).first()).value;
}

/**
 * The demo users' passwords (ADMIN_PASSWORD, or generated) and their hashes, begun at once: on a
 * new database nobody exists yet, so the hashes are made while the database starts rather than
 * after it (two scrypt hashes took 0.2-0.6 s of a first start on a loaded machine). `seed` uses
 * them for the users it creates.
 */
function newPasswords({ adminPassword }) {
  return Object.fromEntries(
    DEMO_USERS.map((demo) => {
      const password = (demo.key === 'admin' ? adminPassword : undefined) ?? randomBytes(12).toString('base64url');
      const hash = hashPassword(password);
      hash.catch(() => {}); // awaited by seed, which reports it; never left unhandled meanwhile
      return [demo.key, { password, hash }];
    }),
  );
}

/**
 * Seeds what is missing. Resolves to { jwtSecret, users: [{ email, password? }] }: a password is
 * there only when it was generated now (printed once, never stored in clear). `passwords`
 * (newPasswords) are the ones to give the users it creates.
 */
async function seed(knex, repo, { adminEmail, adminPassword, passwords }) {
  await migrate(knex);
  await createHostTables(knex);
  const jwtSecret = await setting(knex, 'jwt-secret', () => randomBytes(32).toString('hex'));

  const seedUsers = () =>
    Promise.all(
      DEMO_USERS.map(async (demo) => {
        const email = demo.key === 'admin' ? adminEmail : demo.email;
        const given = demo.key === 'admin' ? adminPassword : undefined;
        const existing = await knex('example_users').where({ email }).first();
        if (existing) {
          // ADMIN_PASSWORD is the admin's password whenever it is set.
          if (given !== undefined && !verifyPassword(given, existing.password_hash)) {
            await knex('example_users')
              .where({ email })
              .update({ password_hash: await hashPassword(given) });
          }
          // An admin seeded before deploy keys needed SUDO gets it (the deploy loop makes one over HTTP).
          if (demo.key === 'admin' && !existing.roles.some((role) => role.name === 'SUDO')) {
            await knex('example_users')
              .where({ email })
              .update({ roles: JSON.stringify([...existing.roles, { name: 'SUDO', permissions: ALL }]) });
          }
          return { email };
        }
        const early = passwords?.[demo.key];
        const password = early?.password ?? given ?? randomBytes(12).toString('base64url');
        const hash = await (early?.hash ?? hashPassword(password));
        await knex('example_users').insert({ id: randomUUID(), email, password_hash: hash, roles: JSON.stringify(demo.roles) });
        return { email, password: given === undefined ? password : undefined };
      }),
    );

  const seedContent = async () => {
    if ((await repo.template.findById(BLOG_TEMPLATE_ID)) === null) {
      await knex('bcms_templates').insert({
        id: BLOG_TEMPLATE_ID,
        name: 'blog',
        label: 'Blog',
        props: JSON.stringify([
          { id: 'title', type: 'STRING' },
          { id: 'body', type: 'STRING' },
        ]),
      });
      for (const [title, body] of BLOG_POSTS) {
        await repo.entry.add({
          templateId: BLOG_TEMPLATE_ID,
          userId: 'seed',
          status: 'published',
          meta: [
            {
              lng: 'en',
              props: [
                { id: 'title', data: [title] },
                { id: 'body', data: [body] },
              ],
            },
          ],
        });
      }
    }
    if ((await repo.template.findByName(SUBMISSIONS_TEMPLATE)) === null) {
      await repo.template.add({ name: SUBMISSIONS_TEMPLATE, label: 'Form submissions', props: [{ id: 'name' }, { id: 'email' }, { id: 'message' }] });
    }
  };

  // At once: the password hashes (libuv's threads) are made while the content's queries run.
  const [users] = await Promise.all([seedUsers(), seedContent()]);
  return { jwtSecret, users };
}

module.exports = { BLOG_TEMPLATE_ID, SUBMISSIONS_TEMPLATE, newPasswords, seed, verifyPassword };
