import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsPlugin, createController, createControllerMethod, useSocket, type BcmsExtensionsRouter } from '../../lib';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

// BCMS's socket as plugin UIs see it (Server-Sent Events at /api/extensions/events, fed by NOTIFY
// so that every instance hears every event), and BCMS's propChanges on template.update.

const token = signToken([role('ADMIN', 'READ', 'WRITE', 'DELETE')], { payload: { userId: 'admin-1', props: { policy: { plugins: [{ name: 'jobs', allowed: true }] } } } });
const auth = `Bearer ${token}`;

const emitter = createBcmsPlugin({
  name: 'emitter',
  controllers: [
    createController({
      name: 'Emit',
      path: '/emit',
      methods: () => ({
        job: createControllerMethod({
          path: '/:id',
          type: 'post',
          handler: async ({ request: req }) => ({ sent: useSocket().emitToScope({ scope: 'global', eventName: 'JOB', eventData: { j: req.params.id } }) }),
        }),
      }),
    }),
  ],
});

interface Stream {
  events: { event: string; data: unknown }[];
  /** Resolves once an event matching `test` arrived. */
  next(test: (event: { event: string; data: unknown }) => boolean): Promise<{ event: string; data: unknown }>;
  close(): void;
}

/** A client of the event stream, as the SDK reads it: fetch with the token in a header. */
async function openStream(origin: string, authorization = auth): Promise<Stream> {
  const controller = new AbortController();
  const response = await fetch(`${origin}/api/extensions/events`, { headers: { Authorization: authorization }, signal: controller.signal });
  if (!response.ok || response.body === null) throw Object.assign(new Error(`stream refused: ${response.status}`), { status: response.status, body: await response.text() });
  const events: Stream['events'] = [];
  const waiting: { test: (event: Stream['events'][number]) => boolean; resolve: (event: Stream['events'][number]) => void }[] = [];
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event === undefined || data === undefined) continue;
          const parsed = { event, data: JSON.parse(data) as unknown };
          events.push(parsed);
          for (const wait of waiting.filter((each) => each.test(parsed))) {
            waiting.splice(waiting.indexOf(wait), 1);
            wait.resolve(parsed);
          }
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    events,
    next: (test) => {
      const seen = events.find(test);
      return seen !== undefined ? Promise.resolve(seen) : new Promise((resolve) => waiting.push({ test, resolve }));
    },
    close: () => controller.abort(),
  };
}

describe.each(backends())('socket events and propChanges (%s)', (backend) => {
  let db: TestDatabase;
  const routers: BcmsExtensionsRouter[] = [];
  const servers: http.Server[] = [];
  const origins: string[] = [];

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    // Two instances of one service: two routers on one database.
    for (let i = 0; i < 2; i++) {
      const router = bcmsExtensions({ plugins: [emitter] }, { database: db.knex, jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger });
      await router.ready;
      const server = http.createServer(express().use(router));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      routers.push(router);
      servers.push(server);
      origins.push(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    }
  });
  afterAll(async () => {
    for (const server of servers) server.closeAllConnections();
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    for (const router of routers) await router.close();
    await db.close();
  });

  test('the stream needs a token: 401 without one', async () => {
    const res = await request(servers[0] as http.Server).get('/api/extensions/events');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: 'Token is `undefined`.' });
    expect(
      (
        await request(servers[0] as http.Server)
          .post('/api/extensions/events')
          .set('Authorization', auth)
      ).status,
    ).toBe(405);
  });

  test('the stream ends when its token expires, and that token is refused then', async () => {
    const exp = Math.floor(Date.now() / 1000) + 2;
    const shortLived = signToken([role('ADMIN', 'READ')], { payload: { exp } });
    const response = await fetch(`${origins[0]}/api/extensions/events`, { headers: { Authorization: `Bearer ${shortLived}` } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    // Read to the end: it comes once the token has expired.
    const text = await response.text();
    expect(text.startsWith(': connected')).toBe(true);
    // Not before the token's expiry (a later end, on a loaded machine, is still right).
    expect(Date.now()).toBeGreaterThanOrEqual(exp * 1000);
    const again = await fetch(`${origins[0]}/api/extensions/events`, { headers: { Authorization: `Bearer ${shortLived}` } });
    expect(again.status).toBe(401);
    expect(await again.json()).toEqual({ message: 'Token has expired.' });
  });

  test("a plugin's useSocket event and an entry written through the SDK reach the streams of both instances", async () => {
    const [a, b] = [await openStream(origins[0] as string), await openStream(origins[1] as string)];
    try {
      // The second instance's listener may still be starting: send until it hears one.
      const heard = b.next((event) => event.event === 'JOB');
      const sender = setInterval(
        () =>
          void request(servers[0] as http.Server)
            .post('/api/plugin/emitter/emit/j1')
            .end(() => undefined),
        200,
      );
      try {
        expect((await heard).data).toEqual({ j: 'j1' });
      } finally {
        clearInterval(sender);
      }
      expect((await a.next((event) => event.event === 'JOB')).data).toEqual({ j: 'j1' });

      const template = await request(servers[1] as http.Server)
        .post('/api/extensions/templates')
        .set('Authorization', auth)
        .send({ label: 'Socket news' });
      expect(template.status).toBe(200);
      expect((await a.next((event) => event.event === 'TEMPLATE')).data).toEqual({ tm: template.body._id, t: 'UPDATE' });
      const entry = await request(servers[1] as http.Server)
        .post(`/api/extensions/templates/${template.body._id}/entries`)
        .set('Authorization', auth)
        .send({ meta: [{ lng: 'en', props: [] }] });
      expect(entry.status).toBe(200);
      expect((await a.next((event) => event.event === 'ENTRY')).data).toEqual({ e: entry.body._id, tm: template.body._id, t: 'UPDATE' });
      await request(servers[0] as http.Server)
        .delete(`/api/extensions/templates/${template.body._id}/entries/${entry.body._id}`)
        .set('Authorization', auth)
        .expect(200);
      expect((await b.next((event) => event.event === 'ENTRY' && (event.data as { t: string }).t === 'REMOVE')).data).toEqual({ e: entry.body._id, tm: template.body._id, t: 'REMOVE' });
    } finally {
      a.close();
      b.close();
    }
  });

  test('propChanges: add, update (label, move) and remove props as BCMS applies them, entries following', async () => {
    const server = servers[0] as http.Server;
    const created = await request(server).post('/api/extensions/templates').set('Authorization', auth).send({ label: 'Todo props' });
    const id = created.body._id as string;
    const before = await request(server)
      .post(`/api/extensions/templates/${id}/entries`)
      .set('Authorization', auth)
      .send({ meta: [{ lng: 'en', props: [] }] });

    const added = await request(server)
      .put('/api/extensions/templates')
      .set('Authorization', auth)
      .send({
        _id: id,
        propChanges: [
          { add: { label: 'Description', type: 'STRING', required: true, array: false, defaultData: [''] } },
          { add: { label: 'Done', type: 'BOOLEAN', required: true, array: false, defaultData: [false] } },
        ],
      });
    expect(added.status).toBe(200);
    const [description, done] = added.body.props as { id: string; name: string }[];
    expect(added.body.props).toEqual([
      { id: expect.any(String), type: 'STRING', required: true, name: 'description', label: 'Description', array: false, defaultData: [''] },
      { id: expect.any(String), type: 'BOOLEAN', required: true, name: 'done', label: 'Done', array: false, defaultData: [false] },
    ]);
    expect(description?.id).not.toBe('');
    // The entry made before has the new props, with their default data.
    const entry = await request(server).get(`/api/extensions/templates/${id}/entries/${before.body._id}`).set('Authorization', auth);
    expect(entry.body.meta).toEqual([
      {
        lng: 'en',
        props: [
          { id: description?.id, data: [''] },
          { id: done?.id, data: [false] },
        ],
      },
    ]);

    const updated = await request(server)
      .put('/api/extensions/templates')
      .set('Authorization', auth)
      .send({ _id: id, propChanges: [{ update: { id: done?.id, label: 'Is done', move: -1, required: false } }] });
    expect(updated.body.props.map((prop: { name: string; required: boolean }) => [prop.name, prop.required])).toEqual([
      ['is_done', false],
      ['description', true],
    ]);

    const removed = await request(server)
      .put('/api/extensions/templates')
      .set('Authorization', auth)
      .send({ _id: id, propChanges: [{ remove: description?.id }] });
    expect(removed.body.props.map((prop: { name: string }) => prop.name)).toEqual(['is_done']);
    const after = await request(server).get(`/api/extensions/templates/${id}/entries/${before.body._id}`).set('Authorization', auth);
    expect(after.body.meta[0].props).toEqual([{ id: done?.id, data: [false] }]);

    const wrong = await request(server)
      .put('/api/extensions/templates')
      .set('Authorization', auth)
      .send({ _id: id, propChanges: [{ remove: 'no-such-prop' }] });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ message: 'body.propChanges[0].remove: the template has no prop "no-such-prop".' });
    const twice = await request(server)
      .put('/api/extensions/templates')
      .set('Authorization', auth)
      .send({ _id: id, propChanges: [{ add: { label: 'Is done', type: 'STRING', required: false, array: false } }] });
    expect(twice.status).toBe(400);
    expect((await request(server).get(`/api/extensions/templates/${id}`).set('Authorization', auth)).body.props).toHaveLength(1);
  });

  test("user.get and user.getAll: the signed-in user, with BCMS's customPool shape under the token's props", async () => {
    const server = servers[0] as http.Server;
    const user = await request(server).get('/api/extensions/user').set('Authorization', auth);
    expect(user.body.customPool).toEqual({
      personal: { firstName: '', lastName: '', avatarUri: '' },
      policy: { media: { get: false, post: false, put: false, delete: false }, templates: [], plugins: [{ name: 'jobs', allowed: true }] },
    });
    expect((await request(server).get('/api/extensions/users').set('Authorization', auth)).body).toEqual({ items: [user.body] });
  });
});
