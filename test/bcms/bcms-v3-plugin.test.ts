import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter, type BcmsPlugin } from '../../lib';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { portBcmsV3Fixture } from './support/bcms-v3';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

// The reading-list fixture is a plugin written as BCMS's plugin-starter is: its controller's setup
// builds its repository with createFSDBRepository / createMongoDBCachedRepository (by
// BCMSConfig.database.fs) and its handlers use it. Ported here with `bcms-ext port`'s own code
// into a folder of this file's own (test-output/, which jest transforms), served over HTTP.
const DIR = path.join(__dirname, '..', '..', 'test-output', 'db-bcms-v3');

function portedReadingList(): BcmsPlugin {
  const { backendMain } = portBcmsV3Fixture('reading-list', { parent: DIR });
  return (require(backendMain as string) as { default: BcmsPlugin }).default;
}

const plugin = portedReadingList();
const writer = `Bearer ${signToken([role('USER', 'READ', 'WRITE', 'DELETE')])}`;
const book = { title: 'Dune', author: { name: 'Frank Herbert' }, quotes: [{ text: 'Fear is the mind-killer.', page: 8 }], shelf: 'sci-fi' };

describe.each(backends())("a BCMS plugin's own repository, ported, over HTTP on %s", (backend) => {
  let database: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    router = bcmsExtensions({ plugins: [plugin] }, { database: database.knex, jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger });
    app = express().use(router);
    await router.ready;
  });
  afterAll(async () => {
    await router.close();
    await database.close();
  });

  test('create, list, find, update and delete a book; its data is in bcms_documents', async () => {
    const created = await request(app).post('/api/plugin/reading-list/book').set('Authorization', writer).send(book);
    expect(created.status).toBe(200);
    const item = created.body.item;
    expect(item).toEqual({ ...book, _id: expect.stringMatching(/^[0-9a-f]{24}$/), read: false, createdAt: expect.any(Number), updatedAt: expect.any(Number) });

    const again = await request(app).post('/api/plugin/reading-list/book').set('Authorization', writer).send(book);
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ message: 'Book "Dune" is already on the list.' });

    expect((await request(app).get('/api/plugin/reading-list/book/all').set('Authorization', writer)).body).toEqual({ items: [item] });
    expect((await request(app).get(`/api/plugin/reading-list/book/${item._id}`).set('Authorization', writer)).body).toEqual({ item });

    const updated = await request(app).put('/api/plugin/reading-list/book').set('Authorization', writer).send({ _id: item._id, read: true });
    expect(updated.status).toBe(200);
    expect(updated.body.item).toEqual({ ...item, read: true, updatedAt: expect.any(Number) });

    const row = await database.knex('bcms_documents').where({ collection: 'bcms_reading-list_books', id: item._id }).first();
    expect(row.doc).toEqual(updated.body.item);

    expect((await request(app).delete(`/api/plugin/reading-list/book/${item._id}`).set('Authorization', writer)).body).toEqual({ item: updated.body.item });
    const gone = await request(app).get(`/api/plugin/reading-list/book/${item._id}`).set('Authorization', writer);
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ message: `Book with ID "${item._id}" does not exist.` });
    expect(Number((await database.knex('bcms_documents').where({ collection: 'bcms_reading-list_books' }).count({ n: '*' }).first())?.n)).toBe(0);
  });

  test('an id that names nothing, or is not an id, is a 404, never a 500', async () => {
    for (const id of ['ffffffffffffffffffffffff', 'not-an-id', "'; drop table bcms_documents; --"]) {
      const res = await request(app)
        .get(`/api/plugin/reading-list/book/${encodeURIComponent(id)}`)
        .set('Authorization', writer);
      expect(res.status).toBe(404);
    }
  });
});
