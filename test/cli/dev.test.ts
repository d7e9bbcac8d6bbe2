import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { watchProject } from '../../lib/cli/dev';
import { until } from '../support/wait';

// What bcms-ext dev sees of a project: every kind of save an editor makes, new folders, renames.
describe('watchProject (bcms-ext dev)', () => {
  let root: string;
  let seen: string[];
  let stop: () => void;

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-dev-'));
    fs.mkdirSync(path.join(root, 'backend', 'todo'), { recursive: true });
    fs.mkdirSync(path.join(root, 'node_modules', 'x'), { recursive: true });
    fs.writeFileSync(path.join(root, 'backend', 'main.ts'), 'export default 1;\n');
    fs.writeFileSync(path.join(root, 'bcms-plugin.config.json'), '{"pluginName":"a"}\n');
    seen = [];
    stop = watchProject(root, ['backend', 'src', 'ui'], (file) => seen.push(path.relative(root, file)));
  });
  afterEach(() => {
    stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  /** Waits until `file` has been reported (inotify delivers within milliseconds; a loaded machine later, and the test's time-out is the limit). */
  async function reported(file: string): Promise<void> {
    await until(() => seen.includes(file), 20);
    seen.length = 0;
  }

  /**
   * Saves `file` (in a folder made after the start) again and again until it is reported: the
   * watcher takes a new folder up when it hears of it, whenever a busy machine lets it.
   */
  async function savedUntilReported(file: string): Promise<void> {
    let saves = 0;
    await until(() => {
      if (seen.includes(path.relative(root, file))) return true;
      fs.writeFileSync(file, `export const saves = ${++saves};\n`);
      return false;
    }, 50);
    seen.length = 0;
  }

  /** An editor's atomic save: a copy written beside the file, then renamed over it. */
  function atomicSave(file: string, text: string): void {
    const copy = path.join(path.dirname(file), `.${path.basename(file)}.tmp`);
    fs.writeFileSync(copy, text);
    fs.renameSync(copy, file);
  }

  test('atomic saves, again and again, of a source and of the plugin config', async () => {
    for (let i = 0; i < 3; i++) {
      atomicSave(path.join(root, 'backend', 'main.ts'), `export default ${i};\n`);
      await reported(path.join('backend', 'main.ts'));
      atomicSave(path.join(root, 'bcms-plugin.config.json'), `{"pluginName":"a${i}"}\n`);
      await reported('bcms-plugin.config.json');
    }
  });

  test('a new folder and a file in it, a file renamed, a source folder made after the start', async () => {
    fs.mkdirSync(path.join(root, 'backend', 'shelf'));
    await reported(path.join('backend', 'shelf'));
    fs.writeFileSync(path.join(root, 'backend', 'shelf', 'index.ts'), 'export {};\n');
    await reported(path.join('backend', 'shelf', 'index.ts'));
    fs.renameSync(path.join(root, 'backend', 'shelf', 'index.ts'), path.join(root, 'backend', 'shelf', 'main.ts'));
    await reported(path.join('backend', 'shelf', 'main.ts'));
    fs.mkdirSync(path.join(root, 'ui', 'src'), { recursive: true });
    await savedUntilReported(path.join(root, 'ui', 'src', 'main.ts'));
  });

  test("the build's own output and dependencies are not changes", async () => {
    fs.mkdirSync(path.join(root, 'ui'));
    // Once the watcher has taken the new folder up (a save in it is reported), what is made in it would be seen.
    await savedUntilReported(path.join(root, 'ui', 'probe.ts'));
    fs.mkdirSync(path.join(root, 'ui', 'dist'));
    fs.writeFileSync(path.join(root, 'ui', 'dist', 'index.html'), '<p></p>\n');
    fs.writeFileSync(path.join(root, 'node_modules', 'x', 'index.js'), '1;\n');
    fs.mkdirSync(path.join(root, 'bcms-bundle'));
    fs.writeFileSync(path.join(root, 'bcms-bundle', 'plugin-a.json'), '{}\n');
    // A change after them: once it is reported, theirs, which came first, would have been.
    fs.writeFileSync(path.join(root, 'backend', 'main.ts'), 'export default 9;\n');
    await until(() => seen.includes(path.join('backend', 'main.ts')), 20);
    expect(seen.filter((file) => /dist|node_modules|bcms-bundle/.test(file))).toEqual([]);
  });
});
