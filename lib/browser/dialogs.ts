// The notifications and the confirm dialog of `window.bcms`: plain DOM in the page that holds the
// SDK's own object (the shell's page, for its plugins' frames; a UI's own page when it is alone).
import type { BcmsNotification } from '../sdk/types';

/**
 * The page's stylesheet for notifications and dialogs, linked once: a file beside this module, so
 * that the shell's CSP needs no inline style.
 */
function ensureStyle(): void {
  if (document.getElementById('bcms-extensions-style') !== null) return;
  const link = document.createElement('link');
  link.id = 'bcms-extensions-style';
  link.rel = 'stylesheet';
  link.href = new URL('./dialogs.css', import.meta.url).href;
  document.head.append(link);
}

let notificationList: HTMLElement | null = null;

/** The list that holds the toasts, made at once so that it is in the page before the first one comes. */
export function notificationHost(): HTMLElement {
  if (notificationList?.isConnected) return notificationList;
  ensureStyle();
  // A plain container, not a landmark: an empty region in every page would be noise; the toasts carry the roles.
  notificationList = document.createElement('div');
  notificationList.className = 'bcms-notifications';
  document.body.append(notificationList);
  return notificationList;
}

/** How long a toast stays: errors and warnings longer, as there is more to read and act on. */
const NOTIFICATION_MS = { success: 5000, info: 5000, warning: 8000, error: 8000 } as const;

function notify(kind: keyof typeof NOTIFICATION_MS, text: string): void {
  const host = notificationHost();
  const toast = document.createElement('div');
  toast.className = `bcms-notification bcms-notification-${kind}`;
  // status: announced when the reader is free; alert: announced at once.
  toast.setAttribute('role', kind === 'success' || kind === 'info' ? 'status' : 'alert');
  const message = document.createElement('p');
  const dismiss = document.createElement('button');
  dismiss.type = 'button';
  dismiss.textContent = '×';
  dismiss.setAttribute('aria-label', 'Dismiss notification');
  toast.append(message, dismiss);
  host.append(toast);
  // The text arrives after the region is in the page: screen readers announce a change to a live
  // region, and some miss a region that appears with its text already in it. A timer, not an
  // animation frame: those wait while the tab is hidden, and the toast would go by empty.
  setTimeout(() => (message.textContent = String(text)), 50);
  // It goes by itself; not while the pointer or the focus is on it (time to read it: WCAG 2.2.1).
  let left = NOTIFICATION_MS[kind];
  let started = Date.now();
  let timer = setTimeout(remove, left);
  function remove(): void {
    clearTimeout(timer);
    // The focus on its button would be lost with it: it goes back to the page.
    if (toast.contains(document.activeElement)) (document.activeElement as HTMLElement).blur();
    toast.remove();
  }
  const pause = (): void => {
    clearTimeout(timer);
    left -= Date.now() - started;
  };
  const resume = (): void => {
    if (toast.matches(':hover') || toast.contains(document.activeElement)) return;
    started = Date.now();
    timer = setTimeout(remove, Math.max(left, 1500));
  };
  toast.addEventListener('mouseenter', pause);
  toast.addEventListener('focusin', pause);
  toast.addEventListener('mouseleave', resume);
  toast.addEventListener('focusout', () => setTimeout(resume));
  dismiss.addEventListener('click', remove);
}

export const notification: BcmsNotification = {
  success: (text) => notify('success', text),
  info: (text) => notify('info', text),
  warning: (text) => notify('warning', text),
  error: (text) => notify('error', text),
};

/** The focused element, looked for inside same-origin frames too (the shell's focus is on a plugin's frame). */
function deepActiveElement(): HTMLElement | null {
  let active: Element | null = document.activeElement;
  while (active !== null && active.tagName === 'IFRAME') {
    let inner: Element | null | undefined;
    try {
      inner = (active as HTMLIFrameElement).contentDocument?.activeElement;
    } catch {
      inner = undefined; // another origin
    }
    if (inner === null || inner === undefined || inner.tagName === 'BODY') break;
    active = inner;
  }
  return active as HTMLElement | null;
}

let dialogCount = 0;

/** BCMS's `confirm(title, text)`: a modal dialog (role alertdialog) with Cancel and OK; Escape cancels; the focus comes back. */
export function confirm(title: string, text: string): Promise<boolean> {
  ensureStyle();
  const returnTo = deepActiveElement();
  const n = ++dialogCount;
  const dialog = document.createElement('dialog');
  dialog.className = 'bcms-confirm';
  dialog.setAttribute('role', 'alertdialog');
  dialog.setAttribute('aria-labelledby', `bcms-confirm-title-${n}`);
  dialog.setAttribute('aria-describedby', `bcms-confirm-text-${n}`);
  const heading = document.createElement('h2');
  heading.id = `bcms-confirm-title-${n}`;
  heading.textContent = String(title);
  const body = document.createElement('p');
  body.id = `bcms-confirm-text-${n}`;
  body.textContent = String(text);
  const buttons = document.createElement('div');
  buttons.className = 'bcms-confirm-buttons';
  const button = (value: string, label: string): HTMLButtonElement => {
    const element = document.createElement('button');
    element.type = 'button';
    element.value = value;
    element.textContent = label;
    element.addEventListener('click', () => dialog.close(value));
    return element;
  };
  const cancel = button('cancel', 'Cancel');
  buttons.append(cancel, button('ok', 'OK'));
  dialog.append(heading, body, buttons);
  document.body.append(dialog);
  // A modal dialog makes the rest of the page inert, toasts included (neither announced nor
  // dismissable): while it is open, they live inside it.
  const toasts = notificationHost();
  const toastsHome = toasts.parentElement ?? document.body;
  return new Promise((resolve) => {
    // Escape closes a modal dialog with an empty returnValue: that is a Cancel.
    dialog.addEventListener('close', () => {
      if (toasts.parentElement === dialog) toastsHome.append(toasts);
      dialog.remove();
      if (returnTo?.isConnected) returnTo.focus();
      resolve(dialog.returnValue === 'ok');
    });
    dialog.showModal();
    dialog.append(toasts);
    // The least destructive choice has the focus first (WAI-ARIA APG, alert dialog).
    cancel.focus();
  });
}
