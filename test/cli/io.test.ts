import { parseArgs, UsageError } from '../../lib/cli/_io';

describe('parseArgs: the flags of every bcms-ext command', () => {
  const spec = { data: 'string', url: 'string', public: 'boolean' } as const;

  test('positionals, --flag value, --flag=value and boolean flags', () => {
    expect(parseArgs(['fn', '--data', '{"a":1}', '--url=http://x', '--public'], spec)).toEqual({
      positionals: ['fn'],
      flags: { data: '{"a":1}', url: 'http://x', public: true },
    });
  });

  test('a value that starts with "-" is a value (a negative number is JSON too)', () => {
    expect(parseArgs(['fn', '--data', '-1'], spec).flags).toEqual({ data: '-1' });
    expect(parseArgs(['--data=-x'], spec).flags).toEqual({ data: '-x' });
  });

  test.each([
    [['--name', 'x'], 'unknown option --name (known: --data, --url, --public)'],
    [['--url'], '--url needs a value'],
    [['--url', '--data', '1'], '--url needs a value'],
    [['--public=yes'], '--public takes no value'],
  ])('%j: a UsageError that says so', (args, message) => {
    expect(() => parseArgs(args, spec)).toThrow(new UsageError(message));
  });
});
