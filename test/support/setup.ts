import { closeSharedTestDatabase } from './database';

// Every test file closes the database it shared (PGlite holds hundreds of MB until closed).
afterAll(closeSharedTestDatabase);
