import request from 'supertest';
import { buildApp, role, signToken, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

// The lengths the SDK's template writes take (200, 200 and 5,000 characters for label, name and
// desc): a longer one is a 400 naming the field, checked before any query; never the 500 that
// Postgres's index row limit made of a 1 MB label.

const editor = `Bearer ${signToken([role('EDITOR', 'READ', 'WRITE', 'DELETE')])}`;
const MISSING = '64b7c0ffee0000000000abcd';

describe.each(backends())('template field lengths on the SDK routes, on %s', (backend) => {
  let database: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    t = await buildApp({}, { database: database.knex, bodyLimit: '2mb' }); // a 1 MB label reaches the check
  });
  afterAll(async () => {
    await t.router.close();
    await database.close();
  });

  const post = (body: object) => request(t.app).post('/api/extensions/templates').set('Authorization', editor).send(body);
  const put = (body: object) => request(t.app).put('/api/extensions/templates').set('Authorization', editor).send(body);
  const count = async () => (await request(t.app).get('/api/extensions/templates/count').set('Authorization', editor)).body.count as number;
  const nothingLogged = () => {
    const messages = t.log.lines.map((line) => line.msg);
    expect(messages).not.toContain('bcms-extensions: database unreachable');
    expect(messages).not.toContain('bcms-extensions: unexpected error');
  };

  test('a 1 MB label is a 400 naming body.label, and nothing is written', async () => {
    const before = await count();
    const res = await post({ label: 'x'.repeat(1_000_000) });
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.body).toEqual({ message: 'body.label is longer than 200 characters (it has 1000000).' });
    expect(await count()).toBe(before);
    nothingLogged();
  });

  test.each([
    [{ label: 'L'.repeat(201) }, 'body.label is longer than 200 characters (it has 201).'],
    [{ label: 'Fine', name: 'n'.repeat(201) }, 'body.name is longer than 200 characters (it has 201).'],
    [{ label: 'Fine', desc: 'd'.repeat(5001) }, 'body.desc is longer than 5000 characters (it has 5001).'],
  ])('POST %#: one character over is a 400 naming the field', async (body, message) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message });
    nothingLogged();
  });

  test('PUT: a label, name or desc over its length is a 400 naming it, before the template is looked up', async () => {
    const cases: [object, string][] = [
      [{ _id: MISSING, label: 'x'.repeat(1_000_000) }, 'body.label is longer than 200 characters (it has 1000000).'],
      [{ _id: MISSING, name: 'n'.repeat(201) }, 'body.name is longer than 200 characters (it has 201).'],
      [{ _id: MISSING, desc: 'd'.repeat(5001) }, 'body.desc is longer than 5000 characters (it has 5001).'],
    ];
    for (const [body, message] of cases) {
      const res = await put(body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ message });
    }
    nothingLogged();
  });

  test('at their lengths, label, name and desc are taken as before', async () => {
    const label = `${'Long label '.repeat(18)}ab`; // 200 characters
    expect(label).toHaveLength(200);
    const made = await post({ label, desc: 'd'.repeat(5000) });
    expect(made.status).toBe(200);
    expect(made.body).toMatchObject({ label, name: `${'long_label_'.repeat(18)}ab`, desc: 'd'.repeat(5000) });
    const renamed = await put({ _id: made.body._id, name: 'n'.repeat(200) });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'n'.repeat(200), label });
    nothingLogged();
  });
});
