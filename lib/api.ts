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
  PreRequestContext,
  PreRequestHandler,
} from './plugin/types';
export { createBcmsFunction } from './function/create';
export type { BcmsFunction, BcmsFunctionAuth, BcmsFunctionConfig, BcmsFunctionContext, BcmsFunctionKeyAuth, BcmsFunctionModule } from './function/types';
export { createJwtProtectionPreRequestHandler } from './plugin/guard';
export { JWTPermissionName, JWTRoleName } from './security/token';
export type { JWT, JWTPayload, JWTPermission, JWTPreRequestHandlerResult, JWTRole } from './security/token';
export type { JwtOptions } from './security/jwt';
export { BcmsHttpError, errorCodes } from './http/errors';
export type { ErrorCode, ErrorHandler } from './http/errors';
export { createApiKey, listApiKeys, blockApiKey, deleteApiKey } from './security/api-keys';
export type { ApiKey, CreatedApiKey, NewApiKey } from './security/api-keys';
export { SIGNATURE_ALGORITHMS } from './security/algorithms';
export type { SignatureAlgorithm } from './security/algorithms';
export type { SignatureAuth } from './security/signature';
export { BCMSRepo } from './db/bcms-repo';
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
export { BCMSRouteProtection } from './plugin/route-protection';
export type {
  BCMSRouteProtectionJwtAndBodyCheckResult,
  BCMSRouteProtectionJwtApiResult,
  BCMSRouteProtectionJwtResult,
  BCMSUserCustomPool,
} from './plugin/route-protection';
export { HTTPStatus } from './http/status';
export type { ObjectPropSchema, ObjectPropSchemaArrayChild, ObjectSchema } from './schema/object-schema';
export type { BodySchema } from './schema/body';
export { useLogger } from './use-logger';
export type { BcmsLogger } from './use-logger';
// purple-cheetah's `Logger`: the logger handed to BCMS code, `(place, message)` and pino's `(object, message)` alike.
export type { BcmsLogger as Logger } from './use-logger';
// The BCMS client's signed calls (issue 15): what GET /api/key/access/list answers.
export type { BcmsKeyAccess } from './function/access-list';
// Plugin-owned repositories (BCMS's FSDB and MongoDB-cached forms, and ours), BCMSConfig, BCMSRepo's shapes.
export {
  createDocumentRepository,
  createFSDBRepository,
  createMongoDBCachedRepository,
  FSDBEntitySchema,
  objectSchemaToMongoDBSchema,
} from './db/plugin-repositories';
export type {
  FSDBEntity,
  FSDBRepository,
  FSDBRepositoryConfig,
  FSDBRepositoryQuery,
  MemCacheHandler,
  MongoDBCachedRepository,
  MongoDBCachedRepositoryConfig,
  MongoDBEntity,
  MongoDBInterface,
  MongoDBQuery,
  MongoDBResult,
  MongoDBSchemaInput,
  MongoDBSchemaOfObjectSchema,
  MongoDBUpdate,
  MongooseSchemaLike,
  RepositoryLogger,
} from './db/plugin-repositories';
export { MAX_DOCUMENT_BYTES } from './db/documents';
export type { DocumentEntity, DocumentFieldOperators, DocumentFilter, DocumentPredicate, DocumentQuery, DocumentRepository, NewDocument } from './db/documents';
export { BCMSConfig } from './bcms-config';
export type {
  BCMSBaseRepository,
  BCMSEntry,
  BCMSEntryRepository,
  BCMSEntryRepositoryMethods,
  BCMSTemplate,
  BCMSTemplateRepository,
  BCMSTemplateRepositoryMethods,
  NewBCMSEntry,
  NewBCMSTemplate,
} from './db/bcms-content';
// The rest of purple-cheetah and BCMS that plugins import (lib/bcms/).
export { MongoDBEntitySchemaString, ObjectUtility, ObjectUtilityError, StringUtility, useObjectUtility, useStringUtility } from './bcms/utilities';
export { FilesRootError, useFS } from './bcms/fs';
export type { FS, FSConfig, FSFileTreeItem, FSFileTreeList } from './bcms/fs';
export { useSocket } from './bcms/socket';
export type { Socket, SocketEvent } from './bcms/socket';
export type { BCMSPluginPolicy, Controller, ControllerMethodPreRequestHandler, Middleware } from './bcms/types';
