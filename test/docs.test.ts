import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

// The README and docs/ as a reader follows them: every link leads to a file that exists and, with
// an anchor, to a heading in it; every page of docs/ is in its index; and every bcms-ext command
// they show is one the CLI has, with options it takes. (The README's quick start and its curl
// block are run by test/example-app.test.ts; the deploy walkthrough by test/cli/workflow.test.ts;
// the Python signing example by test/client/other-languages.test.ts.)

const root = path.resolve(__dirname, '..');
const docsDir = path.join(root, 'docs');
const pages = [
  'README.md',
  'SECURITY.md',
  ...fs
    .readdirSync(docsDir)
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];
const read = (page: string) => fs.readFileSync(path.join(root, page), 'utf8');

/** Markdown outside fenced code blocks, and the code blocks apart. */
function split(markdown: string): { prose: string; code: string[] } {
  const prose: string[] = [];
  const code: string[] = [];
  let block: string[] | undefined;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) {
      if (block === undefined) block = [];
      else {
        code.push(block.join('\n'));
        block = undefined;
      }
    } else if (block !== undefined) block.push(line);
    else prose.push(line);
  }
  return { prose: prose.join('\n'), code };
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\- ]/gu, '')
    .replace(/ /g, '-');

function anchors(page: string): Set<string> {
  const headings = [...split(read(page)).prose.matchAll(/^#{1,6} (.+)$/gm)].map((match) => anchorOf(match[1]!));
  return new Set(headings);
}

/** Inline code spans are not links: `[x](y)` inside backticks is left out. */
const links = (page: string) =>
  [
    ...split(read(page))
      .prose.replace(/`[^`\n]*`/g, '')
      .matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g),
  ].map((match) => match[1]!);

describe('links', () => {
  test.each(pages)('%s: every relative link leads to a file, and every anchor to a heading', (page) => {
    const broken: string[] = [];
    for (const target of links(page)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const resolved = file === '' ? path.join(root, page) : path.resolve(path.dirname(path.join(root, page)), file);
      if (!fs.existsSync(resolved)) broken.push(`${target}: no such file`);
      else if (anchor !== undefined && !(resolved.endsWith('.md') && anchors(path.relative(root, resolved)).has(anchor))) broken.push(`${target}: no such heading`);
    }
    expect(broken).toEqual([]);
  });

  test('docs/index.md links every page of docs/, and the README links the index', () => {
    const indexed = new Set(links('docs/index.md'));
    expect(pages.filter((page) => page.startsWith('docs/') && page !== 'docs/index.md' && !indexed.has(path.basename(page)))).toEqual([]);
    expect(links('README.md')).toContain('docs/index.md');
  });
});

/** The CLI's usage text, by command: the lines from one command's entry to the next. */
function usageByCommand(): Map<string, string> {
  const help = spawnSync(process.execPath, [path.join(root, 'dist', 'cli', 'bin.js'), 'help'], { encoding: 'utf8' });
  expect(help.status).toBe(0);
  const entries = new Map<string, string>();
  let current: string | undefined;
  for (const line of help.stdout.split('\n')) {
    const entry = /^ {2}([a-z]+)\b/.exec(line);
    if (entry) current = entry[1]!;
    if (current !== undefined) entries.set(current, `${entries.get(current) ?? ''}${line}\n`);
  }
  return entries;
}

describe('commands', () => {
  const usage = usageByCommand();
  // Every `bcms-ext ...` in a shell block, or in inline code, as the reader would type it.
  const invocations = pages.flatMap((page) => {
    const { prose, code } = split(read(page));
    const inline = [...prose.matchAll(/`([^`\n]*\bbcms-ext [^`\n]*)`/g)].map((match) => match[1]!);
    const lines = code.flatMap((block) => block.split('\n')).filter((line) => /\bbcms-ext [a-z]/.test(line));
    return [...inline, ...lines].map((text) => ({ page, text }));
  });

  test('the docs show bcms-ext commands (this test checks something)', () => {
    expect(invocations.length).toBeGreaterThan(20);
  });

  test("each is run through the local bin (npx --no, or a script), never a bare npx that could fetch a stranger's package", () => {
    const everywhere = pages.flatMap((page) => [...read(page).matchAll(/npx (?!--no )[^\n`]*bcms-ext/g)].map((match) => `${page}: ${match[0]}`));
    expect(everywhere).toEqual([]);
  });

  test('each names a command the CLI has, with options that command takes', () => {
    const wrong: string[] = [];
    for (const { page, text } of invocations) {
      for (const match of text.matchAll(/\bbcms-ext ([a-z]+)((?: +(?:--?[a-z-]+|[^\s|;&)#]+))*)/g)) {
        const [, command, rest] = match as unknown as [string, string, string];
        const entry = usage.get(command);
        if (entry === undefined) {
          wrong.push(`${page}: bcms-ext ${command}: no such command`);
          continue;
        }
        // A whole option of the command's usage: --func is not --functions.
        for (const option of rest.match(/--[a-z-]+/g) ?? []) if (!new RegExp(`${option}(?![a-z-])`).test(entry)) wrong.push(`${page}: bcms-ext ${command} ${option}: not an option of ${command}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  test('each npm run script in a shell block is one this repository or a generated project has', () => {
    const scripts = new Set(Object.keys((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts));
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-docs-'));
    try {
      for (const kind of ['plugin', 'functions']) {
        const created = spawnSync(process.execPath, [path.join(root, 'dist', 'cli', 'bin.js'), 'create', kind, `docs-${kind}`], { cwd: parent, encoding: 'utf8' });
        expect(created.status).toBe(0);
        const manifest = JSON.parse(fs.readFileSync(path.join(parent, `docs-${kind}`, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
        for (const name of Object.keys(manifest.scripts)) scripts.add(name);
      }
    } finally {
      fs.rmSync(parent, { recursive: true, force: true });
    }
    const unknown = pages.flatMap((page) =>
      split(read(page)).code.flatMap((block) => [...block.matchAll(/\bnpm run ([a-z:-]+)/g)].filter((match) => !scripts.has(match[1]!)).map((match) => `${page}: npm run ${match[1]}`)),
    );
    expect(unknown).toEqual([]);
  });
});
