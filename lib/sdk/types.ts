import type { BcmsEntry as StoredEntry, BcmsTemplate as StoredTemplate } from '../db/shapes';

/**
 * A template's prop, as BCMS shapes it. `type` and the data are `any` on purpose: as loose as
 * @becomes/cms-sdk's own types are strict (its BCMSPropType enum, its prop data unions), so that
 * what the SDK answers here is a cms-sdk `BCMSTemplate` or `BCMSEntry` too, where a BCMS UI holds one.
 */
export interface BcmsProp {
  id: string;
  // biome-ignore lint/suspicious/noExplicitAny: as loose as cms-sdk's BCMSPropType, so that a cms-sdk BCMSTemplate fits (see above)
  type: any;
  required: boolean;
  name: string;
  label: string;
  array: boolean;
  // biome-ignore lint/suspicious/noExplicitAny: BCMS's prop data, loose on purpose (see above)
  defaultData: any;
  // biome-ignore lint/suspicious/noExplicitAny: BCMS's other prop fields, loose on purpose (see above)
  [key: string]: any;
}

/** A template as the SDK's routes answer it (BCMS's `BCMSTemplate`). */
export interface BcmsTemplate extends Omit<StoredTemplate, 'props'> {
  cid: string;
  userId: string;
  props: BcmsProp[];
}

/** One language of an entry's meta: `props[i].data` is an array in BCMS. */
export interface BcmsEntryMeta {
  lng: string;
  // biome-ignore lint/suspicious/noExplicitAny: BCMS's prop data, loose on purpose (see BcmsProp)
  props: { id: string; data: any }[];
}

/** An entry as the SDK's routes answer it (BCMS's `BCMSEntry`). */
export interface BcmsEntry extends Omit<StoredEntry, 'meta' | 'content'> {
  cid: string;
  meta: BcmsEntryMeta[];
  // biome-ignore lint/suspicious/noExplicitAny: BCMS's content nodes, loose on purpose (see BcmsProp)
  content: any[];
}
import type { JWT, JWTRole } from '../security/token';

/** A plugin policy, as BCMS lists it (`plugin.getAll()`); this package defines none yet, so the list is empty. */
export interface BcmsSdkPluginPolicy {
  name: string;
  type?: 'checkbox' | 'select' | 'selectArray' | 'input' | 'inputArray';
  options?: string[];
  default?: string[];
}

/** A plugin as `window.bcms.sdk.plugin.getAll()` lists it: BCMS's `{ name, policies }`, and ours `label`, `uiUrl`. */
export interface BcmsSdkPlugin {
  name: string;
  policies: BcmsSdkPluginPolicy[];
  /** Its readable name: `ui.label`, or the name with its dashes as spaces. */
  label: string;
  /** Where its UI is served (`/plugin/<name>/`), or null when it has none. */
  uiUrl: string | null;
}

/** A function as `window.bcms.sdk.function.getAll()` lists it. */
export interface BcmsSdkFunction {
  name: string;
  public: boolean;
}

/**
 * A failed request, as BCMS's SDK throws it: `{ status, code, message }` (an `Error`, for its
 * stack). `status` is -1 when no answer came (the network failed); `code` is the service's error
 * code when its answer names one.
 */
export interface BcmsSdkError extends Error {
  status: number;
  code?: string;
}

/**
 * The signed-in user's token, decoded in the browser (not verified there: the service verifies it):
 * its header and payload. Not its signature: with it, the claims would be the token itself, and a
 * plugin UI never holds the token.
 */
export type BcmsJwt = Pick<JWT<Record<string, unknown>>, 'header' | 'payload'>;

/** The user a token names, as BCMS's `user.get()` answers: what the token knows of them. */
export interface BcmsUser {
  _id: string;
  username: string;
  email: string;
  roles: JWTRole[];
  /** The token's `props` (BCMS puts its user's `personal`, `address` and `policy` there). */
  customPool: BcmsUserCustomPool;
}

/** BCMS's custom pool: the token's props over BCMS's shape (`personal`, `policy.media`, `policy.templates`, `policy.plugins`). */
export interface BcmsUserCustomPool {
  personal: { firstName: string; lastName: string; avatarUri: string; [key: string]: unknown };
  address?: Record<string, unknown>;
  policy: {
    media: { get: boolean; post: boolean; put: boolean; delete: boolean };
    templates: unknown[];
    /** `[{ name, allowed, fullAccess, options: [{ name, value }] }]` in BCMS. */
    plugins: { name: string; [key: string]: unknown }[];
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** `send`'s argument: BCMS's axios config, the members this SDK reads. */
export interface BcmsSdkSendConfig {
  /** A path of the service's API without `/api` (`/plugin/<name>/todo` requests `<base>/api/plugin/<name>/todo`), or a full URL. */
  url: string;
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD' | 'get' | 'post' | 'put' | 'patch' | 'delete' | 'head' | (string & {});
  /** Sent as JSON. */
  data?: unknown;
  /** `Authorization: ''` asks for the signed-in user's token (BCMS's convention); any other header is sent as it is. */
  headers?: Record<string, string>;
  /** BCMS's flag: never add the token, even for `Authorization: ''`. */
  doNotAuth?: boolean;
}

export interface BcmsTemplateCreateData {
  label: string;
  /** Defaults to the label as a slug. */
  name?: string;
  desc?: string;
  singleEntry?: boolean;
  props?: unknown[];
}

export interface BcmsTemplateUpdateData {
  _id: string;
  label?: string;
  name?: string;
  desc?: string;
  singleEntry?: boolean;
  props?: unknown[];
  /** BCMS's prop changes, applied in order: add a prop, update one (label, required, move...), remove one by id. */
  propChanges?: BcmsPropChange[];
}

/** One of `propChanges`. */
export interface BcmsPropChange {
  add?: { label: string; type: string; required: boolean; array: boolean; defaultData?: unknown };
  remove?: string;
  update?: { id: string; label: string; move: number; required: boolean; array?: boolean; enumItems?: string[]; [key: string]: unknown };
}

/** What a socket subscriber is called with: BCMS's event data (`ENTRY`: `{ e, tm, t }`, `TEMPLATE`: `{ tm, t }`), or a plugin's. */
// biome-ignore lint/suspicious/noExplicitAny: a subscriber types the event data it expects: BCMS's callbacks take it as any
export type BcmsSocketCallback = (data: any) => unknown;

/** `window.bcms.sdk.socket`: the service's events, live (Server-Sent Events from `/api/extensions/events`). */
export interface BcmsSocket {
  /**
   * Calls `callback` with each event named `event` (`ENTRY`, `TEMPLATE`, a plugin's own such as
   * `JOB`; `entry` and `template` too; `ANY` for all) from now on; returns what ends that.
   * The first subscription connects.
   */
  subscribe(event: string, callback: BcmsSocketCallback): () => void;
  connect(): Promise<void>;
  disconnect(): void;
  connected(): boolean;
  /** BCMS's connection id: there is none here. */
  id(): string | null;
  /** BCMS sent an event to the server; nothing on the server listens here, so it goes nowhere. */
  emit(event: string, data: unknown): void;
}

/** A modal a plugin registered: its own component replaces `show` and `hide` (BCMS's pattern). */
export interface BcmsModalItem<Output = unknown, Input = unknown> {
  show(data?: Input): void;
  hide(): void;
  [key: string]: unknown;
  /** For the types only. */
  __output?: Output;
}

/** `window.bcms.modal`: `register({ name })` makes `custom[name]`, which the modal's component then fills. */
export interface BcmsModal {
  register(config: { name: string }): void;
  // biome-ignore lint/suspicious/noExplicitAny: each modal has its own output and input types, as BCMS's ModalService types them
  custom: Record<string, BcmsModalItem<any, any>>;
}

/** `window.bcms.vue.store`: the getters BCMS plugin UIs read. */
export interface BcmsVueStore {
  getters: {
    /** The users the shell knows (the signed-in one). */
    user: BcmsUser[];
    user_items: BcmsUser[];
    user_findOne(query: (user: BcmsUser) => boolean): BcmsUser | undefined;
    user_find(query: (user: BcmsUser) => boolean): BcmsUser[];
  };
}

export interface BcmsEntryCreateData {
  templateId: string;
  status?: string;
  meta: BcmsEntryMeta[];
  content?: unknown[];
}

export interface BcmsEntryUpdateData {
  _id: string;
  templateId: string;
  status?: string;
  meta?: BcmsEntryMeta[];
  content?: unknown[];
}

/** An entry without its content, as `entry.getAllLite` lists it. */
export type BcmsEntryLite = Omit<BcmsEntry, 'content'>;

/**
 * BCMS's `util.throwable`: runs `fn`, then `onSuccess(result)`. On an error it calls
 * `onError(error)`, or without one shows the error's message as an error notification (and
 * resolves to the error).
 */
export type BcmsThrowable = <ThrowableResult, OnSuccessResult = void, OnErrorResult = void>(
  fn: () => Promise<ThrowableResult>,
  onSuccess?: (data: ThrowableResult) => Promise<OnSuccessResult> | OnSuccessResult,
  onError?: (error: unknown) => Promise<OnErrorResult> | OnErrorResult,
) => Promise<OnSuccessResult | OnErrorResult>;

/**
 * `window.bcms.sdk`, in every plugin UI and in the admin shell: BCMS's `@becomes/cms-sdk` 3.4.3
 * names and argument shapes, for the parts this package serves. It carries the signed-in user's
 * token (with none kept, the page's cookies go with its requests, for a service whose
 * `auth.fromRequest` reads the app's session); a 401 to a request that carried it signs the user out.
 */
export interface BcmsSdk {
  /**
   * A request to the service; resolves to the JSON answer, rejects with a {@link BcmsSdkError}.
   * `url` gets `/api` (and the router's mount prefix) put in front, as BCMS's SDK does.
   *
   * @example
   * const { items } = await window.bcms.sdk.send<{ items: Todo[] }>({ url: '/plugin/todo/todo/all', headers: { Authorization: '' } });
   */
  send<T = unknown>(config: BcmsSdkSendConfig): Promise<T>;
  /**
   * Whether a token is kept that has not expired; with none kept, whether the service knows the
   * app's session user (its `auth.fromRequest`), asked of its user route.
   */
  isLoggedIn(): Promise<boolean>;
  /**
   * The kept token, decoded (not verified); with none kept, the app's session user's claims once
   * the user route named them (`header.typ: 'auth.fromRequest'`, `payload: { userId, rls, props }`); or null.
   */
  getAccessToken(): BcmsJwt | null;
  /** Ours: forgets the token (the shell then shows its sign-in). */
  signOut(): void;
  user: {
    /** The signed-in user, as the token knows them. */
    get(): Promise<BcmsUser>;
    /** BCMS lists every user; the host owns its users, so this is the signed-in one. */
    getAll(): Promise<BcmsUser[]>;
  };
  socket: BcmsSocket;
  plugin: { getAll(): Promise<BcmsSdkPlugin[]> };
  function: {
    getAll(): Promise<BcmsSdkFunction[]>;
    /** Ours: `POST /api/function/<name>` with the token (a private function needs a role holding EXECUTE); resolves to its `result`. */
    call<Result = unknown>(name: string, body?: unknown): Promise<Result>;
  };
  template: {
    get(id: string): Promise<BcmsTemplate>;
    getAll(): Promise<BcmsTemplate[]>;
    getMany(ids: string[]): Promise<BcmsTemplate[]>;
    count(): Promise<number>;
    create(data: BcmsTemplateCreateData): Promise<BcmsTemplate>;
    update(data: BcmsTemplateUpdateData): Promise<BcmsTemplate>;
    deleteById(id: string): Promise<true>;
  };
  entry: {
    getAllByTemplateId(data: { templateId: string }): Promise<BcmsEntry[]>;
    getAllLite(data: { templateId: string }): Promise<BcmsEntryLite[]>;
    get(data: { templateId: string; entryId: string }): Promise<BcmsEntry>;
    count(data: { templateId: string }): Promise<number>;
    create(data: BcmsEntryCreateData): Promise<BcmsEntry>;
    update(data: BcmsEntryUpdateData): Promise<BcmsEntry>;
    deleteById(data: { templateId: string; entryId: string }): Promise<true>;
  };
  util: { throwable: BcmsThrowable };
}

/** `window.bcms.notification`: a toast in the admin shell (in the UI's own page when no shell is around it), gone by itself. */
export interface BcmsNotification {
  /** Announced politely (role `status`). */
  success(text: string): void;
  info(text: string): void;
  /** Announced at once (role `alert`). */
  warning(text: string): void;
  error(text: string): void;
}

/**
 * `window.bcms`: in the admin shell, and in each plugin UI's frame as a bridge to the shell
 * (`window.parent.bcms` in a frame is the frame's bridge too, as BCMS plugin UIs read it).
 */
export interface BcmsGlobal {
  sdk: BcmsSdk;
  util: { throwable: BcmsThrowable };
  notification: BcmsNotification;
  /** A modal dialog in the shell, with OK and Cancel: resolves to true for OK, false for Cancel or Escape. */
  confirm(title: string, text: string): Promise<boolean>;
  /** The service's origin, such as `https://cms.example.com`. */
  origin: string;
  modal: BcmsModal;
  vue: { store: BcmsVueStore };
}
