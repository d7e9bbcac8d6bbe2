import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ownManifest } from '../manifest';
import { isUrlSafe } from '../names';
import { parseArgs, UsageError, type Io } from './_io';
import { functionsProjectLayout, packageSpec } from './layout';

export const CREATE_USAGE = `  create plugin NAME                        A plugin project: backend/ (two endpoints, one guarded),
                                            ui/ (Vue 3 .tsx, Vite), bcms-plugin.config.json.
  create functions NAME                     A functions project: src/functions/hello.ts.
  create function FN [--public]             Add src/functions/FN.ts to the functions project here.
  create event NAME                         Add src/events/NAME.ts (an event handler, for each
                                            write of an entry) to the functions project here.
  create job NAME                           Add src/jobs/NAME.ts (a job, run on a cron schedule) to
                                            the functions project here.
`;

/** The root of this package: generated (and ported) projects depend on it by path (it need not be published). */
/** The versions this package is built and tested with, pinned in generated (and ported) projects too. */
export const VERSIONS = { typescript: '7.0.2', vite: '8.3.8', vue: '3.5.45', '@vitejs/plugin-vue-jsx': '5.1.6', '@types/node': '20.19.25' };

/**
 * The embedded database's packages at the versions this package is tested with (its own
 * devDependencies, read from its package.json): a project's tests run the kit's in-memory PGlite.
 */
function embeddedDatabaseVersions(): Record<string, string> {
  const { devDependencies } = ownManifest();
  return Object.fromEntries(['@electric-sql/pglite', 'knex-pglite'].map((name) => [name, devDependencies?.[name] ?? '*']));
}

/**
 * \`npm test\`: the bundles first, then node:test runs test/ against them (no test framework to
 * install). The glob is the shell's (npm runs scripts with sh) and, on Windows, Node's own (21+):
 * \`node --test test/\` finds nothing from Node 21 on, which reads a folder as a file.
 */
const TEST_SCRIPT = 'bcms-ext bundle && node --test test/*.test.mjs';

function write(root: string, files: Record<string, string>): void {
  for (const [file, content] of Object.entries(files)) {
    const target = path.join(root, file);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, content);
  }
}

const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

export function backendTsconfig(include: string[]): string {
  return json({
    compilerOptions: {
      target: 'ES2022',
      module: 'esnext',
      moduleResolution: 'bundler',
      lib: ['ES2023'],
      types: ['node'],
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      isolatedModules: true,
    },
    include,
  });
}

function gitignore(extra: string[] = []): string {
  // bcms-deploy-key.pem: the private key keys create --deploy writes here; it never goes into the repository.
  return `${['node_modules/', 'bcms-bundle/', '.env', 'bcms-deploy-key.pem', ...extra].join('\n')}\n`;
}

function functionSource(name: string, isPublic: boolean): string {
  return `import { createBcmsFunction } from 'bcms-extensions';

// POST /api/function/${name}: ${isPublic ? 'public, anyone may call it' : 'private, called with an HTTP Signature of an API key that lists it'}.
export default createBcmsFunction(async () => ({
  config: { name: '${name}', public: ${isPublic} },
  handler: async ({ request }) => {
    const name = typeof request.body?.name === 'string' ? request.body.name : 'world';
    return { message: \`Hello, \${name}!\` };
  },
}));
`;
}

/** An event handler, as a BCMS event file is written (src/events/<name>.ts), with BCMS's enums. */
function eventSource(name: string): string {
  return `import { BCMSEventConfigMethod, BCMSEventConfigScope, createBcmsEvent } from 'bcms-extensions';

// The event handler "${name}" (named after this file): it runs once for each committed write of an
// entry (added, updated or deleted), on one instance, and is tried again (5 tries in all) if it
// throws. Another scope: BCMSEventConfigScope.TEMPLATE, or a name of your own that
// useBcmsEventManager().emit(scope, method, payload) fires. Its output goes to the service's log.
export default createBcmsEvent(async () => ({
  config: { scope: BCMSEventConfigScope.ENTRY, method: BCMSEventConfigMethod.ALL },
  handler: async ({ scope, method, payload }) => {
    // An entry as the repository gives it (for DELETE, as it was).
    const entry = payload as { _id: string; templateId: string };
    console.log(\`\${scope} \${method}: entry \${entry._id} of template \${entry.templateId}\`);
  },
}));
`;
}

/** A job, as a BCMS job file is written (src/jobs/<name>.ts). */
function jobSource(name: string): string {
  return `import { createBcmsJob } from 'bcms-extensions';

// The job "${name}" (named after this file): its handler runs on each tick of its cron, on one
// instance; a run still going skips the next tick, and one past jobTimeoutMs is ended. The fields
// are a crontab's (minute hour day-of-month month day-of-week): here, every 15 minutes.
export default createBcmsJob(async () => ({
  cron: { minute: '*/15', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' },
  handler: async () => {
    console.log(\`${name}: ran at \${new Date().toISOString()}\`);
  },
}));
`;
}

/**
 * Adds one file to the functions project in `cwd`: src/functions/<name>.ts, src/events/<name>.ts
 * or src/jobs/<name>.ts (beside the project's other folders: functions/, events/, jobs/ at the
 * root in a BCMS v3 project that has them so). Refuses a folder that is not a functions project,
 * and a file that exists.
 */
function addToFunctionsProject(cwd: string, kind: 'function' | 'event' | 'job', name: string, source: string): string {
  // src/ as bcms-ext create makes it (its src/functions may be empty yet), else where the project's folders are.
  const base = fs.existsSync(path.join(cwd, 'src', 'functions')) ? 'src' : functionsProjectLayout(cwd)?.base;
  if (base === undefined) throw new UsageError('no src/functions here: run it in a functions project (bcms-ext create functions NAME)');
  const folder = path.posix.join(base, `${kind}s`);
  const file = path.join(cwd, folder, `${name}.ts`);
  if (fs.existsSync(file)) throw new UsageError(`${folder}/${name}.ts exists already`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, source);
  return `${folder}/${name}.ts`;
}

/** `dependency`, `uiDependency`: bcms-extensions as the project's package.json and ui/package.json name it (packageSpec). */
function pluginFiles(name: string, dependency: string, uiDependency: string): Record<string, string> {
  return {
    'package.json': json({
      name,
      version: '0.1.0',
      private: true,
      scripts: { postinstall: 'npm --prefix ui install', dev: 'bcms-ext dev', bundle: 'bcms-ext bundle', deploy: 'bcms-ext deploy', test: TEST_SCRIPT },
      devDependencies: { 'bcms-extensions': dependency, typescript: VERSIONS.typescript, vite: VERSIONS.vite, '@types/node': VERSIONS['@types/node'], ...embeddedDatabaseVersions() },
    }),
    // projectId: the plugin's identity across renames of pluginName (and copies of the project get their own).
    'bcms-plugin.config.json': json({ pluginName: name, projectId: randomUUID() }),
    'tsconfig.json': backendTsconfig(['backend']),
    '.gitignore': gitignore(['ui/node_modules/', 'ui/dist/']),
    '.env.example': 'BCMS_URL=http://localhost:8080\nBCMS_KEY_ID=\nBCMS_KEY_SECRET=\n',
    'backend/main.ts': `import {
  createBcmsPlugin,
  createController,
  createControllerMethod,
  createJwtProtectionPreRequestHandler,
  JWTPermissionName,
  JWTRoleName,
} from 'bcms-extensions';

const HelloController = createController({
  name: 'Hello',
  path: '/hello',
  methods: () => ({
    // GET /api/plugin/<pluginName>/hello/world: open to anyone.
    world: createControllerMethod({
      path: '/world',
      type: 'get',
      handler: async () => ({ message: 'Hello from ${name}!' }),
    }),
    // GET /api/plugin/<pluginName>/hello/templates: signed-in users whose role holds READ.
    templates: createControllerMethod({
      path: '/templates',
      type: 'get',
      preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ),
      handler: async ({ repo, accessToken }) => ({
        userId: accessToken.payload.userId,
        templates: (await repo.template.findAll()).map((template) => template.name),
      }),
    }),
  }),
});

// The deployed name is pluginName in bcms-plugin.config.json.
export default createBcmsPlugin({ name: '${name}', controllers: [HelloController] });
`,
    'test/plugin.test.mjs': `import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createTestService } from 'bcms-extensions/testing';

// npm test bundles first: this deploys bcms-bundle/, what npm run deploy sends, into a service of
// the test's own (an in-memory database, on a local port), and calls it. See the kit's docs:
// bcms-extensions' docs/testing.md.
let service;
let hello;
before(async () => {
  service = await createTestService();
  const [plugin] = await service.deploy('bcms-bundle');
  hello = \`\${service.url}/api/plugin/\${plugin.name}/hello\`;
});
after(() => service?.close());

test('GET /hello/world answers anyone', async () => {
  const res = await fetch(\`\${hello}/world\`);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { message: 'Hello from ${name}!' });
});

test('GET /hello/templates needs a token whose role holds READ', async () => {
  await service.seed.template({ label: 'Blog posts' });
  assert.equal((await fetch(\`\${hello}/templates\`)).status, 401);
  const token = service.token({ roles: [{ name: 'USER', permissions: ['READ'] }], userId: 'ada' });
  const res = await fetch(\`\${hello}/templates\`, { headers: { Authorization: \`Bearer \${token}\` } });
  assert.deepEqual(await res.json(), { userId: 'ada', templates: ['blog_posts'] });
});
`,
    'ui/package.json': json({
      name: `${name}-ui`,
      private: true,
      scripts: { build: 'vite build' },
      devDependencies: { 'bcms-extensions': uiDependency, vue: VERSIONS.vue, vite: VERSIONS.vite, '@vitejs/plugin-vue-jsx': VERSIONS['@vitejs/plugin-vue-jsx'], typescript: VERSIONS.typescript },
    }),
    'ui/vite.config.mjs': `import vueJsx from '@vitejs/plugin-vue-jsx';
import { defineConfig } from 'vite';

// Relative asset URLs: the UI is served under /plugin/<pluginName>/.
export default defineConfig({ base: './', plugins: [vueJsx()], build: { outDir: 'dist', emptyOutDir: true } });
`,
    'ui/tsconfig.json': json({
      compilerOptions: {
        target: 'ES2022',
        module: 'esnext',
        moduleResolution: 'bundler',
        lib: ['ES2022', 'DOM', 'DOM.Iterable'],
        jsx: 'preserve',
        jsxImportSource: 'vue',
        types: [],
        strict: true,
        noEmit: true,
        skipLibCheck: true,
      },
      include: ['src'],
    }),
    'ui/index.html': `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${name}</title>
    <link rel="stylesheet" href="./src/style.css" />
  </head>
  <body>
    <div id="app"></div>
    <script type="module" src="./src/main.tsx"></script>
  </body>
</html>
`,
    'ui/src/main.tsx': `// The admin shell's look: its font and colours (--bcms-ui-* variables), and the bcms-ui-* classes
// of its buttons and fields (base.css: the stylesheet without Tailwind's directives, which a UI
// built with Tailwind imports as bcms-extensions/ui/styles.css). This UI's own rules are in
// style.css (index.html links it).
import 'bcms-extensions/ui/base.css';
import { createApp } from 'vue';
import { App } from './App';

createApp(App).mount('#app');
`,
    'ui/src/App.tsx': `import { defineComponent, onMounted, ref } from 'vue';
import type {} from 'bcms-extensions/sdk'; // declares window.bcms (types only)

// As a BCMS plugin UI starts. In the shell's sandboxed frame, window.bcms (and window.parent.bcms)
// is a bridge to the shell, which holds the token: notifications and dialogs show there.
window.bcms = window.parent.bcms;

export const App = defineComponent({
  setup() {
    const greeting = ref('');
    const templates = ref<string[]>([]);
    const state = ref<'loading' | 'ready'>('loading');
    async function load(): Promise<void> {
      state.value = 'loading';
      // throwable shows an error as a notification; on success, the second function gets the result.
      await window.bcms.util.throwable(
        async () =>
          Promise.all([
            // This plugin's own back end: send puts /api in front of the URL.
            window.bcms.sdk.send<{ message: string }>({ url: '/plugin/${name}/hello/world' }),
            // Authorization '' asks send to add the signed-in user's token (BCMS's convention).
            window.bcms.sdk.send<{ templates: string[] }>({ url: '/plugin/${name}/hello/templates', headers: { Authorization: '' } }),
          ]),
        async ([hello, list]) => {
          greeting.value = hello.message;
          templates.value = list.templates;
          state.value = 'ready';
        },
      );
    }
    onMounted(load);
    // bcms-ui-plugin-layout: the shell's font, colours and background around the whole UI.
    return () => (
      <main class="bcms-ui-plugin-layout plugin">
        <h1>${name}</h1>
        {state.value === 'loading' && <p role="status">Loading…</p>}
        {state.value === 'ready' && [
          <p class="plugin-lead">{greeting.value}</p>,
          <section class="plugin-card" aria-labelledby="templates-title">
            <h2 id="templates-title">Templates</h2>
            <ul aria-label="Templates">
              {templates.value.map((template) => (
                <li key={template}>{template}</li>
              ))}
            </ul>
            <button type="button" class="bcms-ui-button bcms-ui-button-secondary bcms-ui-button-s" onClick={load}>
              Reload
            </button>
          </section>,
        ]}
      </main>
    );
  },
});
`,
    'ui/src/style.css': `/* This UI's own rules, over the shell's look (bcms-extensions/ui/base.css, imported in main.tsx),
   whose --bcms-ui-* colours they use. */
body { margin: 0; }
.plugin { padding: 1.5rem; box-sizing: border-box; } /* the layout's min-height, padding included: no scrollbar */
.plugin h1 { margin: 0 0 0.25rem; font-size: 1.5rem; }
.plugin-lead { margin: 0 0 1.5rem; color: var(--bcms-ui-muted); }
.plugin-card { max-width: 40rem; padding: 1rem 1.25rem; border: 1px solid var(--bcms-ui-line); border-radius: var(--bcms-ui-radius); background: var(--bcms-ui-surface); }
.plugin-card h2 { margin: 0 0 0.5rem; font-size: 1.1rem; }
.plugin-card ul { margin: 0 0 1rem; padding-left: 1.25rem; }
`,
  };
}

function functionsFiles(name: string, dependency: string): Record<string, string> {
  return {
    'package.json': json({
      name,
      version: '0.1.0',
      private: true,
      scripts: { bundle: 'bcms-ext bundle', deploy: 'bcms-ext deploy', test: TEST_SCRIPT },
      devDependencies: { 'bcms-extensions': dependency, typescript: VERSIONS.typescript, vite: VERSIONS.vite, '@types/node': VERSIONS['@types/node'], ...embeddedDatabaseVersions() },
    }),
    'tsconfig.json': backendTsconfig(['src']),
    '.gitignore': gitignore(),
    '.env.example': 'BCMS_URL=http://localhost:8080\nBCMS_KEY_ID=\nBCMS_KEY_SECRET=\n',
    'src/functions/hello.ts': functionSource('hello', true),
    'test/hello.test.mjs': `import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createTestService } from 'bcms-extensions/testing';

// npm test bundles first: this deploys bcms-bundle/, what npm run deploy sends, into a service of
// the test's own (an in-memory database, on a local port), and calls it. See the kit's docs:
// bcms-extensions' docs/testing.md.
let service;
before(async () => {
  service = await createTestService();
  await service.deploy('bcms-bundle');
});
after(() => service?.close());

test('hello greets by name', async () => {
  // Signed with an API key that lists the function, as a server calls a private one.
  const { status, body } = await service.signedCall('hello', { name: 'Ada' });
  assert.equal(status, 200);
  assert.deepEqual(body, { success: true, result: { message: 'Hello, Ada!' } });
});
`,
  };
}

export async function runCreate(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { positionals, flags } = parseArgs(args, { public: 'boolean' });
  const [what, name] = positionals;
  const kinds = ['plugin', 'functions', 'function', 'event', 'job'];
  if (what === undefined || !kinds.includes(what) || name === undefined || positionals.length !== 2) {
    throw new UsageError('expected create plugin NAME, create functions NAME, create function FN [--public], create event NAME or create job NAME');
  }
  if (!isUrlSafe(name)) throw new UsageError(`${JSON.stringify(name)} is not a URL-safe name (letters, digits, "-", "_", ".", "~")`);
  if (what === 'function') {
    const file = addToFunctionsProject(cwd, 'function', name, functionSource(name, flags.public === true));
    io.out(`Created ${file} (${flags.public ? 'public' : 'private'}). Bundle and deploy it with: npm run bundle && npm run deploy\n`);
    return 0;
  }
  if (what === 'event' || what === 'job') {
    if (flags.public !== undefined) throw new UsageError('--public is for create function FN');
    const file = addToFunctionsProject(cwd, what, name, what === 'event' ? eventSource(name) : jobSource(name));
    io.out(`Created ${file} (the ${what} "${name}"). Bundle and deploy it with the project's functions: npm run bundle && npm run deploy\n`);
    return 0;
  }
  const root = path.join(cwd, name);
  if (fs.existsSync(root)) throw new UsageError(`${root} exists already: choose another name or folder`);
  if (flags.public !== undefined) throw new UsageError('--public is for create function FN');
  write(root, what === 'plugin' ? pluginFiles(name, packageSpec(root), packageSpec(path.join(root, 'ui'))) : functionsFiles(name, packageSpec(root)));
  const install = what === 'plugin' ? 'npm install            # the back end at the root; the UI in ui/ (postinstall)' : 'npm install';
  io.out(
    `Created the ${what === 'plugin' ? 'plugin' : 'functions'} project ${name}/. Next:\n` +
      `  cd ${name}\n  ${install}\n` +
      `  npm test               # bundles, then test/ deploys the bundles into a service of its own and calls them\n` +
      `  cp .env.example .env   # BCMS_URL; then a key that may deploy: BCMS_TOKEN=<a SUDO JWT> npx --no bcms-ext keys create --name deployer --deploy --env-file .env\n` +
      `  npm run bundle\n  npm run deploy\n`,
  );
  return 0;
}
