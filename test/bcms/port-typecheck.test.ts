import { portBcmsV3Fixture, typeCheckPorted } from './support/bcms-v3';

// The BCMS-idiom fixtures, ported by bcms-ext port (only their import lines change), type-check
// strictly against this package's declarations, as bcms-ext bundle checks them in a project.
describe('the BCMS v3 fixtures, ported, type-check (strict, tsc)', () => {
  test.each(['reading-list', 'blog-functions', 'todo-board', 'site-customization'] as const)('%s', (name) => {
    const { dir } = portBcmsV3Fixture(name);
    const { status, output } = typeCheckPorted(dir);
    expect(output).toBe('');
    expect(status).toBe(0);
  });
});
