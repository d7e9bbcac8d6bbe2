import { closeBuiltApps } from './app';
import { closeSharedTestDatabase } from './database';

// Every test file closes what it left open: the routers buildApp made (their isolates and pools),
// then the database it shared (PGlite holds hundreds of MB until closed).
afterAll(async () => {
  await closeBuiltApps();
  await closeSharedTestDatabase();
});
