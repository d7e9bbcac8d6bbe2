// The admin shell's API view (`<admin.path>/api`): the service's OpenAPI document,
// `<base>/api/extensions/openapi.json`, rendered by Swagger UI (swagger-ui-dist, copied into dist at
// build time and served beside this file). Swagger UI runs under the shell's Content-Security-Policy
// as it is: no inline script or style, no eval, nothing fetched from another origin. It is loaded
// only when the view opens (1.7 MB, 460 KB gzipped), so the shell's other pages never pay for it.

/** The part of Swagger UI's request object that the interceptor changes. */
interface SwaggerRequest {
  url: string;
  headers: Record<string, string>;
}

interface SwaggerOptions {
  domNode: HTMLElement;
  spec: Record<string, unknown>;
  validatorUrl: null;
  deepLinking: boolean;
  requestInterceptor: (request: SwaggerRequest) => SwaggerRequest;
}

type SwaggerUIBundle = (options: SwaggerOptions) => unknown;

const TOKEN_KEY = 'bcms.accessToken';
/** This file's folder, `<base>/api/extensions/`: the document and Swagger UI's files are beside it. */
const here = new URL('./', import.meta.url);
/** The router's mount path (`/cms` for `app.use('/cms', router)`), '' at the root. */
const base = here.pathname.replace(/\/api\/extensions\/$/, '');

let loading: Promise<SwaggerUIBundle> | undefined;

/** Appends a script or stylesheet of this origin to the page; resolves when it has loaded. */
function load(element: HTMLScriptElement | HTMLLinkElement): Promise<void> {
  return new Promise((resolve, reject) => {
    element.addEventListener('load', () => resolve(), { once: true });
    element.addEventListener('error', () => reject(new Error(`${element instanceof HTMLScriptElement ? element.src : element.href} could not be loaded`)), { once: true });
    document.head.append(element);
  });
}

/** Swagger UI's script and stylesheets (its own, then the shell's adjustments to it), once per page. */
function swaggerUi(): Promise<SwaggerUIBundle> {
  loading ??= (async () => {
    const script = document.createElement('script');
    script.src = new URL('swagger-ui-bundle.js', here).href;
    const styles = ['swagger-ui.css', 'api.css'].map((file) => Object.assign(document.createElement('link'), { rel: 'stylesheet', href: new URL(file, here).href }));
    await Promise.all([load(script), ...styles.map(load)]);
    return (window as unknown as { SwaggerUIBundle: SwaggerUIBundle }).SwaggerUIBundle;
  })();
  loading.catch(() => {
    loading = undefined; // a failed load is tried again the next time the view opens
  });
  return loading;
}

/**
 * A request made by "Try it out". The document's paths are the service's from its root
 * (`/api/plugin/...`): under a mount path they are sent under it. A request to this origin carries
 * the signed-in user's token, as the SDK's do, unless the user authorized another; a request to
 * any other origin never gets it.
 */
export function prepareRequest(request: SwaggerRequest, origin: string = location.origin): SwaggerRequest {
  const url = new URL(request.url, origin);
  if (url.origin !== origin) return request;
  if (base !== '' && url.pathname.startsWith('/api/') && !url.pathname.startsWith(`${base}/`)) {
    url.pathname = base + url.pathname;
    request.url = url.href;
  }
  const token = localStorage.getItem(TOKEN_KEY);
  const named = Object.keys(request.headers).some((name) => name.toLowerCase() === 'authorization');
  if (token !== null && !named) request.headers.Authorization = `Bearer ${token}`;
  return request;
}

/**
 * What Swagger UI 5 leaves out for assistive technology and the keyboard, put in as it renders
 * (axe-core's critical button-name and select-name, serious label-content-name-mismatch and
 * scrollable-region-focusable): a name for the dialogs' close button (an icon only), for the
 * servers select, for an enum
 * parameter's select in "Try it out" (its name is in the row, not a label) and for the Authorize
 * dialog's submit button (named "Apply credentials" while it reads "Authorize"); and a Tab stop on
 * an operation's code blocks (the curl line, the answers), which scroll sideways. And axe-core's
 * moderate ones: Swagger UI's `<main>` is a region (see below), each operation's responses region
 * is named after its operation (they were all "Responses"), and a dialog's headings are levels 2
 * and 3 (an h3 and h4 under the page's h1).
 */
export function repairAccessibility(root: ParentNode): void {
  for (const block of root.querySelectorAll('.opblock-body pre:not([tabindex])')) block.setAttribute('tabindex', '0');
  for (const button of root.querySelectorAll('button.close-modal:not([aria-label])')) button.setAttribute('aria-label', 'Close');
  // The document names its server (the router's mount path): Swagger UI offers it in a select with no name.
  for (const select of root.querySelectorAll('select#servers:not([aria-label])')) select.setAttribute('aria-label', 'Server');
  for (const select of root.querySelectorAll<HTMLSelectElement>('tr[data-param-name] select:not([aria-label])')) {
    select.setAttribute('aria-label', (select.closest('tr[data-param-name]') as HTMLElement).dataset.paramName as string);
  }
  // Swagger UI's own <main>, inside the shell's: a second main landmark, nested, for a screen reader's
  // landmark list; a region named "Operations" instead (axe-core calls a role on <main> a minor fault).
  for (const main of root.querySelectorAll('main:not([role])')) {
    main.setAttribute('role', 'region');
    main.setAttribute('aria-label', 'Operations');
  }
  for (const responses of root.querySelectorAll<HTMLElement>('.opblock section[id$="_responses"]:not([aria-label]), .opblock [role="region"][id$="_responses"]:not([aria-label])')) {
    const block = responses.closest('.opblock');
    const verb = block?.querySelector('.opblock-summary-method')?.textContent?.trim();
    const route = block?.querySelector<HTMLElement>('.opblock-summary-path')?.dataset.path;
    if (verb !== undefined && route !== undefined) responses.setAttribute('aria-label', `Responses of ${verb} ${route}`);
  }
  for (const title of root.querySelectorAll('.modal-ux-header > h3:not([aria-level])')) title.setAttribute('aria-level', '2');
  for (const heading of root.querySelectorAll('.modal-ux-content h4:not([aria-level])')) heading.setAttribute('aria-level', '3');
  for (const button of root.querySelectorAll('button[aria-label="Apply credentials"]')) {
    const text = (button.textContent ?? '').trim();
    if (text !== '') button.setAttribute('aria-label', `${text}: apply credentials`);
  }
}

/** The document, from this origin, with the shell's token as "Try it out" sends it (a service may serve it to signed-in users only). */
async function fetchDocument(url: string): Promise<Record<string, unknown>> {
  const request = prepareRequest({ url, headers: { Accept: 'application/json' } });
  const response = await fetch(request.url, { headers: request.headers });
  // The token was refused (expired, revoked): signed out, as the SDK's calls do it; the shell shows the sign-in form.
  if (response.status === 401 && request.headers.Authorization !== undefined) (window as { bcms?: { sdk?: { signOut?(): void } } }).bcms?.sdk?.signOut?.();
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  return (await response.json()) as Record<string, unknown>;
}

/**
 * Renders the document into `container` (emptied first), with a link to the document itself.
 * Rejects, with the container saying why, when Swagger UI or the document could not be loaded.
 */
export async function renderApi(container: HTMLElement): Promise<void> {
  const status = document.createElement('p');
  status.setAttribute('role', 'status');
  status.textContent = 'Loading the API document…';
  container.replaceChildren(status);
  const url = new URL('openapi.json', here).href;
  let render: SwaggerUIBundle;
  let spec: Record<string, unknown>;
  try {
    [render, spec] = await Promise.all([swaggerUi(), fetchDocument(url)]);
  } catch (error) {
    status.setAttribute('role', 'alert');
    status.className = 'bcms-error';
    status.textContent = `The API document could not be shown: ${(error as Error).message}.`;
    throw error;
  }
  const link = Object.assign(document.createElement('a'), { href: url, textContent: 'openapi.json' });
  const source = Object.assign(document.createElement('p'), { className: 'bcms-api-source' });
  source.append('The OpenAPI 3.1 document: ', link, '.');
  const target = Object.assign(document.createElement('div'), { className: 'bcms-api-document' });
  container.replaceChildren(source, target);
  // Swagger UI renders later parts (an operation opened, a dialog) as they are asked for.
  new MutationObserver(() => repairAccessibility(target)).observe(target, { childList: true, subtree: true });
  render({
    domNode: target,
    spec,
    validatorUrl: null, // Swagger UI would otherwise send the document to validator.swagger.io
    deepLinking: false, // the shell owns the URL's #fragment (a plugin's own route)
    requestInterceptor: (request) => prepareRequest(request),
  });
}
