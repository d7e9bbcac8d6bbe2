import type { EventEmitter } from 'node:events';
import { applyPropChanges, metaAfterPropChanges } from './prop-changes';
import { type BCMSContentRepo, type BCMSEntry, type BCMSTemplate, BcmsRepoFieldError, TemplateNameTakenError } from '../db/content';
import type { BcmsFunction } from '../function/types';
import { BcmsHttpError } from '../http/errors';
import { createController, createControllerMethod } from '../plugin/create';
import { createJwtAndBodyGuard, createJwtProtectionPreRequestHandler, decidesOnTokenFirst, verifyFromContext } from '../plugin/guard';
import type { BcmsController, BcmsPlugin, BcmsPluginPolicy, PreRequestHandler } from '../plugin/types';
import type { ObjectSchema } from '../schema/object-schema';
import { type JWT, JWTPermissionName, JWTRoleName } from '../security/token';
import { pluginLabel } from '../ui/assets';
import type { BcmsLogger } from '../handler-logger';
import {
  checkMetaData,
  checkTemplateLengths,
  ENTRY_CREATE_SCHEMA,
  ENTRY_UPDATE_SCHEMA,
  type EntryCreateBody,
  type EntryUpdateBody,
  TEMPLATE_CREATE_SCHEMA,
  TEMPLATE_UPDATE_SCHEMA,
  type TemplateCreateBody,
  type TemplateUpdateBody,
  templateNameOf,
} from './bodies';

// Any role name: what `window.bcms.sdk` may do is what the token's roles hold (READ, WRITE, DELETE).
const ANY_ROLE = Object.values(JWTRoleName);
/** Any role that holds READ: the shell's users. Also the OpenAPI document's guard when the `openapi` option is 'token'. */
export const reader = createJwtProtectionPreRequestHandler(ANY_ROLE, JWTPermissionName.READ);
const deleter = createJwtProtectionPreRequestHandler(ANY_ROLE, JWTPermissionName.DELETE);
/** WRITE, and the body checked against the schema (a 400 naming the first field that does not fit). */
const writer = <Body>(bodySchema: ObjectSchema): PreRequestHandler<{ accessToken: JWT; body: Body }> => createJwtAndBodyGuard<unknown, Body>('the SDK', ANY_ROLE, JWTPermissionName.WRITE, bodySchema);

/** Any verified token, whatever its roles hold: the signed-in user may always read who they are. */
const signedIn: PreRequestHandler<{ accessToken: JWT<Record<string, unknown>> }> = decidesOnTokenFirst(
  async (context) => ({ accessToken: (await verifyFromContext(context)) as JWT<Record<string, unknown>> }),
  (accessToken) => ({ accessToken }),
);

/**
 * BCMS's BCMSUser (`_id`, `username`, `email`, `roles`, `customPool`), as the token knows the
 * user: a host that puts the user's name and email in the token's props (or payload) has them
 * shown. `customPool` has BCMS's shape (`personal`, `policy.media`, `policy.templates`,
 * `policy.plugins`), what the token's props hold over it.
 */
function userOf(accessToken: JWT<Record<string, unknown>>) {
  const { userId, rls, props } = accessToken.payload;
  const own = (props ?? {}) as Record<string, unknown>;
  const said = (name: 'username' | 'email'): string | undefined => {
    const value = own[name] ?? (accessToken.payload as unknown as Record<string, unknown>)[name];
    return typeof value === 'string' ? value : undefined;
  };
  const object = (value: unknown): Record<string, unknown> => (value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {});
  const policy = object(own.policy);
  const customPool = {
    ...own,
    personal: { firstName: '', lastName: '', avatarUri: '', ...object(own.personal) },
    policy: {
      ...policy,
      media: { get: false, post: false, put: false, delete: false, ...object(policy.media) },
      templates: Array.isArray(policy.templates) ? policy.templates : [],
      plugins: Array.isArray(policy.plugins) ? policy.plugins : [],
    },
  };
  return { _id: userId, username: said('username') ?? userId, email: said('email') ?? '', roles: rls, customPool };
}

/** Who wrote it, as the token names them (a token's `userId` that is not a string names no one). */
const writerOf = (accessToken: JWT): string => (typeof accessToken.payload.userId === 'string' ? accessToken.payload.userId : '');

const notFound = (what: string) => new BcmsHttpError('NOT_FOUND', `${what} not found.`);
const badRequest = (message: string) => new BcmsHttpError('BAD_REQUEST', message);
const emptyName = () => badRequest('body.name must not be empty: leave it out to have one made from the label.');
/** A label, name or desc past its length: a 400 naming it, before any query (a long name is past Postgres's index row limit). */
const tooLong = (body: Parameters<typeof checkTemplateLengths>[0]): void => {
  const message = checkTemplateLengths(body);
  if (message !== null) throw badRequest(message);
};

/**
 * A repository write whose input the repository refused (a NUL character, half a surrogate pair,
 * a taken name) as a 400 naming the body's field; anything else is passed on (a 500 that says
 * nothing of it).
 */
async function written<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (error instanceof BcmsRepoFieldError) throw badRequest(`body.${error.field} ${error.problem}`);
    if (error instanceof TemplateNameTakenError) throw badRequest(`A template named "${error.templateName}" exists: give another name or label.`);
    throw error;
  }
}

/** The entry without `content`: BCMS's `BCMSEntryLite`. */
const lite = ({ content: _content, ...entry }: BCMSEntry): Omit<BCMSEntry, 'content'> => entry;

/** A plugin's `policy()`, awaited; one that throws or resolves to something other than an array lists none, and is logged. */
async function policiesOf(plugin: BcmsPlugin, logger: BcmsLogger): Promise<BcmsPluginPolicy[]> {
  if (typeof plugin.policy !== 'function') return [];
  try {
    const policies: unknown = await plugin.policy();
    if (Array.isArray(policies)) return policies as BcmsPluginPolicy[];
    logger.warn({ plugin: plugin.name }, `bcms-extensions: plugin "${plugin.name}": policy() resolved to something other than an array; listed with no policies`);
  } catch (error) {
    logger.warn({ plugin: plugin.name, err: error }, `bcms-extensions: plugin "${plugin.name}": policy() threw; listed with no policies`);
  }
  return [];
}

/**
 * What `window.bcms.sdk` calls (`/api/extensions/...`): the plugins (with their UI's URL and
 * policies), the functions, the signed-in user, and templates and entries in BCMS shapes, read
 * (READ), written (WRITE) and deleted (DELETE) through the content store `repo` and `BCMSRepo`
 * read. Any role name: the token's roles must hold the permission.
 */
export function createSdkController(options: {
  /** The registry's plugins and the deployed ones, as they are now. */
  plugins: () => readonly BcmsPlugin[];
  hasUi: (name: string) => boolean;
  functions: () => ReadonlyMap<string, BcmsFunction>;
  /** BCMSRepo's repositories on the router's database. */
  content: BCMSContentRepo;
  /** Where a change is told (`'socket'`: BCMS's ENTRY and TEMPLATE events, which reach every plugin UI). */
  events?: EventEmitter;
}): BcmsController {
  const { plugins, hasUi, functions, content, events } = options;
  const { template: templates, entry: entries } = content;
  /** BCMS's socket events: `ENTRY` `{ e, tm, t }`, `TEMPLATE` `{ tm, t }` (t: UPDATE or REMOVE). */
  const changed = <T>(eventName: 'ENTRY' | 'TEMPLATE', eventData: Record<string, string>, value: T): T => {
    events?.emit('socket', { scope: 'global', eventName, eventData });
    return value;
  };

  /** By `_id` (a template's PUT and DELETE take nothing else). */
  const templateById = async (id: string): Promise<BCMSTemplate> => {
    const template = await templates.findById(id);
    if (template === null) throw notFound('Template');
    return template;
  };
  /** By `_id`, `cid` or `name`, as BCMS's routes take a template (`findByRef`): a UI written for BCMS may hold any. */
  const templateOf = async (ref: string): Promise<BCMSTemplate> => {
    const template = await templates.methods.findByRef(ref);
    if (template === null) throw notFound('Template');
    return template;
  };
  /** The entry, when it belongs to the template (a template or its ref); asked for under another, or none, it is not found. */
  const entryOf = async (template: BCMSTemplate | string, entryId: string): Promise<BCMSEntry> => {
    const owner = typeof template === 'string' ? await templates.methods.findByRef(template) : template;
    const entry = owner === null ? null : await entries.methods.findByTemplateIdAndId(owner._id, entryId);
    if (entry === null) throw notFound('Entry');
    return entry;
  };
  /** A name no other template has (a taken one is a 400 that says so). */
  const freeName = async (name: string, self?: string): Promise<string> => {
    const holder = await templates.methods.findByName(name);
    if (holder !== null && holder._id !== self) throw badRequest(`A template named ${JSON.stringify(name)} exists: give another name or label.`);
    return name;
  };
  /** The name a label makes, as BCMS makes it; one with no letter or digit makes none. */
  const nameOfLabel = (label: string): string => {
    const name = templateNameOf(label);
    if (name === '') throw badRequest(`body.label ${JSON.stringify(label)} makes no template name (lower-case letters, digits and "_"): give a label with a letter or a digit, or a name.`);
    return name;
  };

  return createController({
    name: 'SDK',
    path: '/',
    methods: () => ({
      plugins: createControllerMethod({
        path: '/plugins',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request, logger }) => ({
          plugins: await Promise.all(
            plugins().map(async (plugin) => ({
              name: plugin.name,
              label: pluginLabel(plugin),
              uiUrl: hasUi(plugin.name) ? `${request.baseUrl}/plugin/${plugin.name}/` : null,
              policies: await policiesOf(plugin, logger),
            })),
          ),
        }),
      }),
      functions: createControllerMethod({
        path: '/functions',
        type: 'get',
        preRequestHandler: reader,
        handler: async () => ({ functions: [...functions().values()].map(({ config }) => ({ name: config.name, public: config.public })) }),
      }),
      user: createControllerMethod({
        path: '/user',
        type: 'get',
        preRequestHandler: signedIn,
        handler: async ({ accessToken }) => userOf(accessToken),
      }),
      // BCMS lists every user; the host owns its users, so the signed-in one is all this knows.
      users: createControllerMethod({
        path: '/users',
        type: 'get',
        preRequestHandler: signedIn,
        handler: async ({ accessToken }) => ({ items: [userOf(accessToken)] }),
      }),

      templates: createControllerMethod({
        path: '/templates',
        type: 'get',
        preRequestHandler: reader,
        handler: async () => ({ templates: await templates.findAll() }),
      }),
      templateCount: createControllerMethod({
        path: '/templates/count',
        type: 'get',
        preRequestHandler: reader,
        handler: async () => ({ count: await templates.count() }),
      }),
      templateMany: createControllerMethod({
        path: '/templates/many',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request }) => {
          const { ids } = request.query;
          const given = typeof ids === 'string' ? [ids] : Array.isArray(ids) && ids.every((id) => typeof id === 'string') ? (ids as string[]) : undefined;
          if (given === undefined) throw badRequest('Query ids is required: the template ids, separated by commas (?ids=a,b).');
          const wanted = [...new Set(given.flatMap((id) => id.split(',')).filter((id) => id !== ''))];
          return { templates: await templates.findAllById(wanted) };
        },
      }),
      template: createControllerMethod({
        path: '/templates/:id',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request }) => templateOf(request.params.id as string),
      }),
      templateCreate: createControllerMethod({
        path: '/templates',
        type: 'post',
        preRequestHandler: writer<TemplateCreateBody>(TEMPLATE_CREATE_SCHEMA),
        handler: async ({ body, accessToken }) => {
          tooLong(body);
          if (body.name === '') throw emptyName();
          const name = await freeName(body.name ?? nameOfLabel(body.label));
          const template = await written(() =>
            templates.add({
              name,
              label: body.label,
              desc: body.desc ?? '',
              singleEntry: body.singleEntry ?? false,
              props: body.props ?? [],
              userId: writerOf(accessToken),
            }),
          );
          return changed('TEMPLATE', { tm: template._id, t: 'UPDATE' }, template);
        },
      }),
      templateUpdate: createControllerMethod({
        path: '/templates',
        type: 'put',
        preRequestHandler: writer<TemplateUpdateBody>(TEMPLATE_UPDATE_SCHEMA),
        handler: async ({ body }) => {
          tooLong(body);
          const current = await templateById(body._id);
          // As BCMS: a new label renames the template, unless a name is given.
          if (body.name === '') throw emptyName();
          const name = body.name ?? (body.label !== undefined && body.label !== current.label ? nameOfLabel(body.label) : undefined);
          if (name !== undefined && name !== current.name) await freeName(name, current._id);
          const { _id, label, desc, singleEntry } = body;
          let props = body.props;
          const applied = body.propChanges === undefined ? undefined : applyPropChanges(props ?? current.props, body.propChanges);
          if (applied !== undefined) props = applied.props;
          const updated = await written(() => templates.methods.update({ _id, name, label, desc, singleEntry, props }));
          if (updated === null) throw notFound('Template');
          // As BCMS: an added prop gets its default data in every entry, a removed one leaves them.
          if (applied !== undefined && (applied.added.length > 0 || applied.removed.length > 0)) {
            for (const entry of await entries.methods.findAllByTemplateId(_id)) {
              await written(() => entries.methods.update({ _id: entry._id, meta: metaAfterPropChanges(entry.meta, applied) }));
            }
          }
          return changed('TEMPLATE', { tm: updated._id, t: 'UPDATE' }, updated);
        },
      }),
      templateDelete: createControllerMethod({
        path: '/templates/:id',
        type: 'delete',
        preRequestHandler: deleter,
        // Its entries go with it (the foreign key cascades), as BCMS deletes them.
        handler: async ({ request }) => {
          if (!(await templates.deleteById(request.params.id as string))) throw notFound('Template');
          return changed('TEMPLATE', { tm: request.params.id as string, t: 'REMOVE' }, true);
        },
      }),

      entries: createControllerMethod({
        path: '/templates/:templateId/entries',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request }) => {
          const template = await templateOf(request.params.templateId as string);
          return { entries: await entries.methods.findAllByTemplateId(template._id) };
        },
      }),
      entriesLite: createControllerMethod({
        path: '/templates/:templateId/entries/lite',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request }) => {
          const template = await templateOf(request.params.templateId as string);
          return { entries: (await entries.methods.findAllByTemplateId(template._id)).map(lite) };
        },
      }),
      entryCount: createControllerMethod({
        path: '/templates/:templateId/entries/count',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request }) => {
          const template = await templateOf(request.params.templateId as string);
          return { count: await entries.methods.countByTemplateId(template._id) };
        },
      }),
      entry: createControllerMethod({
        path: '/templates/:templateId/entries/:entryId',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request }) => entryOf(request.params.templateId as string, request.params.entryId as string),
      }),
      entryCreate: createControllerMethod({
        path: '/templates/:templateId/entries',
        type: 'post',
        preRequestHandler: writer<EntryCreateBody>(ENTRY_CREATE_SCHEMA),
        handler: async ({ request, body, accessToken }) => {
          const template = await templateOf(request.params.templateId as string);
          const bad = checkMetaData(body.meta);
          if (bad !== null) throw badRequest(bad);
          const entry = await written(() =>
            entries.add({
              templateId: template._id,
              userId: writerOf(accessToken),
              status: body.status ?? '',
              meta: body.meta,
              content: body.content ?? [],
            }),
          );
          return changed('ENTRY', { e: entry._id, tm: template._id, t: 'UPDATE' }, entry);
        },
      }),
      entryUpdate: createControllerMethod({
        path: '/templates/:templateId/entries',
        type: 'put',
        preRequestHandler: writer<EntryUpdateBody>(ENTRY_UPDATE_SCHEMA),
        handler: async ({ request, body }) => {
          const template = await templateOf(request.params.templateId as string);
          if (body.templateId !== undefined && body.templateId !== template._id) {
            throw badRequest(`body.templateId ${JSON.stringify(body.templateId)} is not the template of the path (${JSON.stringify(template._id)}): an entry stays in its template.`);
          }
          await entryOf(template, body._id);
          const bad = checkMetaData(body.meta);
          if (bad !== null) throw badRequest(bad);
          const { _id, status, meta, content: entryContent } = body;
          const updated = await written(() => entries.methods.update({ _id, status, meta, content: entryContent }));
          if (updated === null) throw notFound('Entry');
          return changed('ENTRY', { e: updated._id, tm: template._id, t: 'UPDATE' }, updated);
        },
      }),
      entryDelete: createControllerMethod({
        path: '/templates/:templateId/entries/:entryId',
        type: 'delete',
        preRequestHandler: deleter,
        handler: async ({ request }) => {
          const entry = await entryOf(request.params.templateId as string, request.params.entryId as string);
          if (!(await entries.deleteById(entry._id))) throw notFound('Entry');
          return changed('ENTRY', { e: entry._id, tm: entry.templateId, t: 'REMOVE' }, true);
        },
      }),
    }),
  });
}
