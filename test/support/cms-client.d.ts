// The part of @becomes/cms-client 3.4.1 the tests use, as its own declarations give it
// (main.d.ts, types/main.d.ts, types/handlers/function.d.ts, types/util/security.d.ts). The
// package ships them, but its `exports` map names no `types`, so TypeScript's nodenext resolution
// finds none.

declare module '@becomes/cms-client' {
  /** BCMSApiKeyAccess, as GET /api/key/access/list answers it. */
  export interface BCMSApiKeyAccess {
    templates: { _id: string; name: string; get: boolean; post: boolean; put: boolean; delete: boolean }[];
    functions: { name: string }[];
    plugins?: { name: string }[];
  }
  export interface BCMSClientConfig {
    cmsOrigin: string;
    key: { id: string; secret: string };
    enableCache?: boolean;
    debug?: boolean;
  }
  /** `send`: axios's config, signed (query key, nonce, timestamp, signature), `url` under `${cmsOrigin}/api`. */
  export interface BCMSClientSendConfig {
    url: string;
    method: string;
    data?: unknown;
    headers?: Record<string, string>;
    query?: Record<string, string>;
    /** Called with axios's error instead of logging and rethrowing it; what it resolves to is what `send` resolves to. */
    onError?(error: unknown): Promise<unknown>;
  }
  export interface BCMSClient {
    getKeyAccess(): Promise<BCMSApiKeyAccess>;
    send<ResultBody = unknown>(config: BCMSClientSendConfig): Promise<ResultBody>;
    function: {
      call<Payload, Result>(functionName: string, payload?: Payload): Promise<{ success: boolean; result: Result }>;
    };
  }
  export function createBcmsClient(config: BCMSClientConfig): BCMSClient;
}

declare module '@becomes/cms-client/util' {
  /** BCMSApiKeySignature: key, timestamp, nonce, signature. */
  export interface BCMSApiKeySignature {
    k: string;
    t: number | string;
    n: string;
    s: string;
  }
  export function createBcmsClientSecurity(config: { apiKeyId: string; apiKeySecret: string }): { sign<Payload>(payload: Payload): BCMSApiKeySignature };
}
