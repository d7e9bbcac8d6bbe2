import type { BcmsEntry, BcmsTemplate } from '../db/shapes';

/** A plugin as `window.bcms.sdk.plugin.getAll()` lists it. */
export interface BcmsSdkPlugin {
  name: string;
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

/** A failed request: the HTTP status and the service's message (or code, for functions). */
export interface BcmsSdkError extends Error {
  status: number;
  code?: string;
}

/**
 * `window.bcms.sdk`, in every plugin UI and in the admin shell. It carries the signed-in user's
 * token; a 401 signs the user out.
 */
export interface BcmsSdk {
  /** A request to the service with the token; resolves to the JSON answer, rejects with a BcmsSdkError. A 401 signs out. */
  send<T = unknown>(config: { url: string; method?: string; data?: unknown }): Promise<T>;
  isLoggedIn(): boolean;
  getAccessToken(): string | null;
  /** Forgets the token (the shell then shows its sign-in). */
  signOut(): void;
  plugin: { getAll(): Promise<BcmsSdkPlugin[]> };
  function: {
    getAll(): Promise<BcmsSdkFunction[]>;
    /** `POST /api/function/<name>` with the token (a private function needs a role holding EXECUTE); resolves to its `result`. */
    call<Result = unknown>(name: string, body?: unknown): Promise<Result>;
  };
  template: { getAll(): Promise<BcmsTemplate[]>; get(id: string): Promise<BcmsTemplate> };
  entry: { getAllByTemplateId(templateId: string): Promise<BcmsEntry[]>; get(templateId: string, entryId: string): Promise<BcmsEntry> };
}

export type { BcmsEntry, BcmsTemplate };
