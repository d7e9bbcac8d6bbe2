import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readDotEnv } from '../../lib/cli/dotenv';

// The CLI reads a project's .env as dotenv does (issue 37, item 7: the kept parser, not our own).

test("a project's .env: quotes, export, comments, CRLF and multi-line values; none at all is empty", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-dotenv-'));
  try {
    expect(readDotEnv(dir)).toEqual({});
    fs.writeFileSync(
      path.join(dir, '.env'),
      '# a deploy key\r\nBCMS_URL=http://localhost:8080\r\nexport BCMS_KEY_ID="k 1"\nBCMS_KEY_SECRET=\'s3cr=t\'\nSPACED = value  \nNOTE=kept # a comment\nPEM="-----BEGIN\nline\n-----END"\n',
    );
    expect(readDotEnv(dir)).toEqual({ BCMS_URL: 'http://localhost:8080', BCMS_KEY_ID: 'k 1', BCMS_KEY_SECRET: 's3cr=t', SPACED: 'value', NOTE: 'kept', PEM: '-----BEGIN\nline\n-----END' });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
