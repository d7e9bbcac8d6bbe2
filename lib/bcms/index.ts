// The BCMS layer's public names: what exists only so that code written for BCMS v3's back end runs
// here (purple-cheetah's utilities, BCMSRepo, plugin repositories, useLogger, useFS, useSocket,
// BCMSConfig, BCMSRouteProtection). lib/api.ts re-exports them beside the core's.
export { BCMSRepo } from './repo';
export { BCMSEventManager, useBcmsEventManager } from './event-manager';
export { BCMSRouteProtection } from './route-protection';
export type {
  BCMSRouteProtectionJwtAndBodyCheckResult,
  BCMSRouteProtectionJwtApiResult,
  BCMSRouteProtectionJwtResult,
  BCMSUserCustomPool,
} from './route-protection';
export { useLogger } from './use-logger';
// purple-cheetah's `Logger`: the logger handed to BCMS code, `(place, message)` and pino's `(object, message)` alike.
export type { BcmsLogger as Logger } from '../handler-logger';
// The BCMS client's signed calls (issue 15): what GET /api/key/access/list answers.
export type { BcmsKeyAccess } from './client/access-list';
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
export { BCMSConfig } from './config';
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
} from '../db/content';
// The rest of purple-cheetah and BCMS that plugins import (lib/bcms/).
export { MongoDBEntitySchemaString, ObjectUtility, ObjectUtilityError, StringUtility, useObjectUtility, useStringUtility } from './utilities';
export { FilesRootError, useFS } from './fs';
export type { FS, FSConfig, FSFileTreeItem, FSFileTreeList } from './fs';
export { useSocket } from './socket';
export type { Socket, SocketEvent } from './socket';
export type { BCMSPluginPolicy, Controller, ControllerMethodPreRequestHandler, Middleware } from './types';
