import { createSSRApp, h, type Component } from 'vue';
import { renderToString } from 'vue/server-renderer';

// Browser code (DOM types), type-checked by lib/bcms/ui/tsconfig.json: required here, not imported,
// so that the Node test project does not compile it without the DOM's types.
const { BCMSIcon } = require('../../lib/bcms/ui/components') as { BCMSIcon: Component };

// BCMSIcon draws the icons BCMS's UIs ask for by path: bngine's job details (/eye/show) and its
// command arrows (/arrow/up, /arrow/down) drew a dot when only the last part was looked up.
const DOT = 'M12 12h.5';
const draw = (src: string) => renderToString(createSSRApp({ render: () => h(BCMSIcon, { src }) }));

test.each(['/eye/show', '/eye/hide', '/arrow/up', '/arrow/down', '/edit', '/trash', '/plus', '/chevron/down'])('%s: drawn, hidden from screen readers', async (src) => {
  const svg = await draw(src);
  expect(svg).toContain(`data-icon="${src.slice(1)}"`);
  expect(svg).toContain('aria-hidden="true"');
  expect(svg).not.toContain(`d="${DOT}"`);
});

test('a folder BCMS has that is not drawn here falls back to its last part; an unknown name is a dot', async () => {
  expect(await draw('/icons/edit.svg')).toContain('data-icon="edit"');
  expect(await draw('/nothing/like-it')).toContain(`d="${DOT}"`);
});
