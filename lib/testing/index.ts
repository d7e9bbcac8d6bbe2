// `bcms-extensions/testing`: a service for an extension's tests (docs/testing.md).
export { createTestService } from './service';
export type { TestAnswer, TestDeployment, TestService, TestServiceOptions } from './service';
export type { SeedEntry, SeedTemplate, TestSeed } from './seed';
export type { TestRole, TestTokenOptions } from './token';
