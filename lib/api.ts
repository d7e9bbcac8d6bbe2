// Everything the package exports but the router itself: what code inside an isolate gets for
// `require('bcms-extensions')` (lib/isolate/child.ts), without loading Express and the router.
// The host's logger (the `logger` option): pino's shape.
export type { Logger as ServiceLogger } from './logger';
export { createBcmsPlugin, createController, createControllerMethod } from './plugin/create';
export type {
  BcmsController,
  BcmsControllerMethod,
  BcmsPlugin,
  BcmsPluginContext,
  BcmsPluginHandlerContext,
  HttpVerb,
  MethodRoute,
  PreRequestContext,
  PreRequestHandler,
  SentBody,
} from './plugin/types';
export { createBcmsFunction } from './function/create';
export { createBcmsEvent, createBcmsJob } from './events/create';
export { BCMSEventConfigMethod, BCMSEventConfigScope } from './events/types';
export type { BCMSEvent, BCMSEventConfig, BCMSEventHandler, BCMSEventHandlerData, BcmsEventManager, BCMSJob, BCMSJobCron, BCMSJobHandler, BcmsEventModule, BcmsJobModule } from './events/types';
export type { BcmsFunction, BcmsFunctionAuth, BcmsFunctionConfig, BcmsFunctionContext, BcmsFunctionKeyAuth, BcmsFunctionModule } from './function/types';
export { createJwtProtectionPreRequestHandler } from './plugin/guard';
export { JWTPermissionName, JWTRoleName } from './security/token';
export type { JWT, JWTPayload, JWTPermission, JWTPreRequestHandlerResult, JWTRole } from './security/token';
export type { JwtOptions } from './security/jwt';
export type { AppUser, AuthOptions } from './security/auth';
export type { RateLimit, RateLimitOptions } from './security/rate-limit';
export { BcmsHttpError, errorCodes } from './http/errors';
export { keepRawBody } from './http/body';
export type { ErrorCode, ErrorHandler } from './http/errors';
export type { CorsOption, CorsOptions } from './http/cors';
export type { ErrorHook, ErrorReport } from './http/on-error';
export type { OpenApiAccess, OpenApiInfo, OpenApiOption } from './openapi/info';
export { createApiKey, listApiKeys, blockApiKey, deleteApiKey } from './security/api-keys';
export type { ApiKey, CreatedApiKey, NewApiKey } from './security/api-keys';
export { SIGNATURE_ALGORITHMS } from './security/algorithms';
export type { SignatureAlgorithm } from './security/algorithms';
export type { SignatureAuth } from './security/signature';
export { migrate, MIGRATIONS_DIRECTORY, MIGRATIONS_TABLE } from './db/migrate';
export type { DatabaseOption } from './db/connection';
export type {
  BcmsEntry,
  BcmsEntryMeta,
  BcmsEntryMetaProp,
  BcmsEntryRepo,
  BcmsRepo,
  BcmsTemplate,
  BcmsTemplateRepo,
  EntryUpdate,
  NewEntry,
  NewTemplate,
  TemplateUpdate,
} from './db/repository';
export { HTTPStatus } from './http/status';
export type { ObjectPropSchema, ObjectPropSchemaArrayChild, ObjectSchema } from './schema/object-schema';
export type { BodySchema } from './schema/body';
export type { BcmsLogger } from './handler-logger';
// The BCMS layer's names (lib/bcms/). Without that folder and this line, the core stands alone.
export * from './bcms'; // BCMS layer
