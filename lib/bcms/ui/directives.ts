/** The directives BCMS plugin UIs register from `@becomes/cms-ui`: `cy`, `clickOutside`, `tooltip`. */
import type { Directive } from 'vue';

/** `v-cy="'name'"`: a `data-cy` attribute, for end-to-end tests. */
export const cy: Directive<HTMLElement, string | undefined> = {
  beforeMount(el, binding) {
    if (binding.value) el.setAttribute('data-cy', binding.value);
  },
  updated(el, binding) {
    if (binding.value) el.setAttribute('data-cy', binding.value);
    else el.removeAttribute('data-cy');
  },
};

type OnClickOutside = (event: MouseEvent) => void;
const outside = new WeakMap<HTMLElement, (event: MouseEvent) => void>();

/** `v-clickOutside="handler"`: calls it for a click anywhere but inside the element. */
export const clickOutside: Directive<HTMLElement, OnClickOutside> = {
  mounted(el, binding) {
    const listener = (event: MouseEvent): void => {
      if (!el.contains(event.target as Node)) binding.value?.(event);
    };
    outside.set(el, listener);
    // Not the click that mounted it.
    setTimeout(() => document.addEventListener('click', listener), 0);
  },
  beforeUnmount(el) {
    const listener = outside.get(el);
    if (listener !== undefined) document.removeEventListener('click', listener);
    outside.delete(el);
  },
};

/** What `v-tooltip` takes: the text, or BCMS's `{ msg, type }`. */
export type BCMSTooltipInput = string | { msg: string; type?: 'default' | 'info' | 'warning' | 'error' };

const tooltipText = (value: BCMSTooltipInput | undefined): string => (value === undefined ? '' : typeof value === 'string' ? value : value.msg);

/** `v-tooltip="'text'"`: the element's `title` (shown on hover and focus by the browser, read by screen readers). */
export const tooltip: Directive<HTMLElement, BCMSTooltipInput | undefined> = {
  beforeMount(el, binding) {
    const text = tooltipText(binding.value);
    if (text !== '') el.setAttribute('title', text);
  },
  updated(el, binding) {
    const text = tooltipText(binding.value);
    if (text !== '') el.setAttribute('title', text);
    else el.removeAttribute('title');
  },
};
