import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { main } from '../../lib/cli/main';
import { openDatabase } from '../../lib/db/connection';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t), env: {} }, out, err };
}

describe('bcms-ext migrate', () => {
  test('migrates an embedded database, then finds it up to date', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-cli-'));
    const first = capture();
    expect(await main(['migrate', '--pglite', dir], first.io)).toBe(0);
    expect(first.out.join('')).toContain('Applied: 20261122000000_content_store.js');
    const second = capture();
    expect(await main(['migrate', '--pglite', dir], second.io)).toBe(0);
    expect(second.out.join('')).toContain('Already up to date.');
    const database = openDatabase({ pglite: dir });
    expect(await database.knex.schema.hasTable('bcms_entries')).toBe(true);
    await database.close();
  }, 60_000);

  test('an unreachable server: exit 1 and what to do next', async () => {
    const run = capture();
    expect(await main(['migrate', '--database', 'postgres://postgres@127.0.0.1:1/none'], run.io)).toBe(1);
    expect(run.err.join('')).toMatch(/Check that the database is running and reachable/);
  });

  test('bad arguments and unknown commands: exit 1 with usage', async () => {
    const bad = capture();
    expect(await main(['migrate', '--url'], bad.io)).toBe(1);
    expect(bad.err.join('')).toMatch(/expected --database URL or --pglite DIR/);
    const unknown = capture();
    expect(await main(['deploy-everything'], unknown.io)).toBe(1);
    expect(unknown.err.join('')).toMatch(/unknown command "deploy-everything"/);
    const help = capture();
    expect(await main(['help'], help.io)).toBe(0);
    expect(help.out.join('')).toMatch(/Usage: bcms-ext/);
  });
});
