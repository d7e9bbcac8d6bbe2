/**
 * `bcms-extensions/ui`: Vue 3 components with the names and props that BCMS plugin UIs use from
 * `@becomes/cms-ui`, styled like the admin shell (`bcms-extensions/ui/styles.css`). Written here,
 * with render functions: nothing of cms-ui's code.
 */
import { defineComponent, getCurrentInstance, h, nextTick, onMounted, ref, watch, type PropType, type VNode } from 'vue';

const slot = (slots: { default?: () => VNode[] }): VNode[] => slots.default?.() ?? [];

/** BCMS's button: `kind` primary, secondary, alternate, ghost or danger; a link when it has `href`. */
export const BCMSButton = defineComponent({
  name: 'BCMSButton',
  props: {
    kind: { type: String as PropType<'primary' | 'secondary' | 'alternate' | 'ghost' | 'danger'>, default: 'primary' },
    cyTag: String,
    class: String,
    style: String,
    disabled: Boolean,
    size: String as PropType<'s' | 'm'>,
    href: String,
    newTab: Boolean,
  },
  emits: { click: (event: MouseEvent) => event instanceof MouseEvent },
  setup(props, { emit, slots }) {
    return () =>
      h(
        props.href === undefined ? 'button' : 'a',
        {
          class: ['bcms-ui-button', `bcms-ui-button-${props.kind}`, props.size === undefined ? '' : `bcms-ui-button-${props.size}`, props.class ?? ''],
          style: props.style,
          'data-cy': props.cyTag,
          ...(props.href === undefined
            ? { type: 'button', disabled: props.disabled }
            : { href: props.href, target: props.newTab ? '_blank' : undefined, rel: props.newTab ? 'noopener' : undefined, 'aria-disabled': props.disabled || undefined }),
          onClick: (event: MouseEvent) => {
            if (props.disabled) return event.preventDefault();
            emit('click', event);
          },
        },
        slot(slots),
      );
  },
});

/** Outline icons (24×24, stroke) for the names BCMS UIs ask for; an unknown name draws a dot. */
const ICONS: Record<string, string> = {
  edit: 'M4 20h4L19 9l-4-4L4 16v4zM13.5 6.5l4 4',
  trash: 'M4 7h16M10 11v6M14 11v6M6 7l1 13h10l1-13M9 7V4h6v3',
  plus: 'M12 5v14M5 12h14',
  close: 'M6 6l12 12M18 6L6 18',
  check: 'M5 12l5 5L20 7',
  'chevron-down': 'M6 9l6 6 6-6',
  'chevron-up': 'M6 15l6-6 6 6',
  'chevron-left': 'M15 6l-6 6 6 6',
  'chevron-right': 'M9 6l6 6-6 6',
  'arrow-left': 'M19 12H5M11 6l-6 6 6 6',
  'arrow-right': 'M5 12h14M13 6l6 6-6 6',
  search: 'M11 18a7 7 0 1 0 0-14 7 7 0 0 0 0 14zM20 20l-4-4',
  refresh: 'M20 11a8 8 0 1 0-2.3 5.7M20 5v6h-6',
  play: 'M7 5l12 7-12 7V5z',
  info: 'M12 21a9 9 0 1 0 0-18 9 9 0 0 0 0 18zM12 11v6M12 7v.5',
  warning: 'M12 4l9 16H3l9-16zM12 10v4M12 17v.5',
  dots: 'M5 12h.5M12 12h.5M19 12h.5',
  settings: 'M12 15a3 3 0 1 0 0-6 3 3 0 0 0 0 6zM4 12h2M18 12h2M12 4v2M12 18v2',
  // BCMS's icon folders: /eye/show, /arrow/up and the like.
  'eye/show': 'M2 12s3.5-7 10-7 10 7 10 7-3.5 7-10 7S2 12 2 12zM12 15a3 3 0 1 0 0-6 3 3 0 0 0 0 6z',
  'eye/hide': 'M3 3l18 18M10.6 6.1A10 10 0 0 1 12 6c6.5 0 10 6 10 6a17 17 0 0 1-3.2 3.9M6.6 6.6C3.8 8.4 2 12 2 12s3.5 7 10 7a9.7 9.7 0 0 0 5.4-1.6M9.9 9.9a3 3 0 0 0 4.2 4.2',
  'arrow/up': 'M12 19V5M6 11l6-6 6 6',
  'arrow/down': 'M12 5v14M6 13l6 6 6-6',
  'arrow/left': 'M19 12H5M11 6l-6 6 6 6',
  'arrow/right': 'M5 12h14M13 6l6 6-6 6',
  'chevron/up': 'M6 15l6-6 6 6',
  'chevron/down': 'M6 9l6 6 6-6',
  'chevron/left': 'M15 6l-6 6 6 6',
  'chevron/right': 'M9 6l6 6-6 6',
};

/**
 * BCMS's icon: `src` names it by its path (`/edit`, `/trash`, `/eye/show`, `/arrow/up`...), or by
 * its last part; decorative, so hidden from screen readers.
 */
export const BCMSIcon = defineComponent({
  name: 'BCMSIcon',
  props: { src: { type: String, default: '' } },
  setup(props) {
    return () => {
      const path = props.src.replace(/^\//, '').replace(/\.svg$/, '');
      const name = path in ICONS ? path : (path.split('/').pop() ?? '');
      return h(
        'svg',
        {
          class: 'bcms-ui-icon',
          viewBox: '0 0 24 24',
          fill: 'none',
          stroke: 'currentColor',
          'stroke-width': 2,
          'stroke-linecap': 'round',
          'stroke-linejoin': 'round',
          'aria-hidden': 'true',
          focusable: 'false',
          'data-icon': name,
        },
        [h('path', { d: ICONS[name] ?? 'M12 12h.5' })],
      );
    };
  },
});

/** A spinner over the page while `show`; its message is announced. */
export const BCMSSpinner = defineComponent({
  name: 'BCMSSpinner',
  props: { show: Boolean, message: String },
  setup(props) {
    return () =>
      props.show
        ? h('div', { class: 'bcms-ui-spinner-overlay', role: 'status', 'aria-live': 'polite' }, [
            h('span', { class: 'bcms-ui-spinner', 'aria-hidden': 'true' }),
            h('span', { class: props.message ? 'bcms-ui-spinner-message' : 'bcms-ui-visually-hidden' }, props.message || 'Loading'),
          ])
        : null;
  },
});

/** A small inline spinner while `show`. */
export const BCMSSpinnerSmall = defineComponent({
  name: 'BCMSSpinnerSmall',
  props: { show: { type: Boolean, default: false } },
  setup(props) {
    return () => (props.show ? h('span', { class: 'bcms-ui-spinner bcms-ui-spinner-small', role: 'status', 'aria-label': 'Loading' }) : null);
  },
});

/** The frame of a plugin UI: the shell's type and colours around its content. */
export const BCMSPluginLayout = defineComponent({
  name: 'BCMSPluginLayout',
  setup(_props, { slots }) {
    return () => h('div', { class: 'bcms-ui-plugin-layout' }, slot(slots));
  },
});

export interface BCMSManagerNavItem {
  name: string;
  link: string;
  selected?: boolean;
  onClick?: (event: MouseEvent, item: BCMSManagerNavItem) => void;
}

/** A side navigation of the plugin's views: `items` link to routes of the plugin's own router (or anywhere). */
export const BCMSManagerNav = defineComponent({
  name: 'BCMSManagerNav',
  props: {
    label: { type: String, default: '' },
    items: { type: Array as PropType<BCMSManagerNavItem[]>, default: () => [] },
    actionText: String,
  },
  emits: { action: () => true },
  setup(props, { emit }) {
    const router = getCurrentInstance()?.appContext.config.globalProperties.$router as { push(to: string): unknown; resolve?(to: string): { href: string } } | undefined;
    return () =>
      h('nav', { class: 'bcms-ui-manager-nav', 'aria-label': props.label || 'Plugin' }, [
        props.label ? h('p', { class: 'bcms-ui-manager-nav-label' }, props.label) : null,
        h(
          'ul',
          props.items.map((item) =>
            h('li', { key: item.link }, [
              h(
                'a',
                {
                  href: router?.resolve?.(item.link).href ?? item.link,
                  class: ['bcms-ui-manager-nav-item', item.selected ? 'bcms-ui-selected' : ''],
                  'aria-current': item.selected ? 'page' : undefined,
                  onClick: (event: MouseEvent) => {
                    item.onClick?.(event, item);
                    if (event.defaultPrevented || router === undefined || /^[a-z]+:/i.test(item.link)) return;
                    event.preventDefault();
                    void router.push(item.link);
                  },
                },
                item.name,
              ),
            ]),
          ),
        ),
        props.actionText ? h(BCMSButton, { kind: 'secondary', class: 'bcms-ui-manager-nav-action', onClick: () => emit('action') }, () => props.actionText) : null,
      ]);
  },
});

let modalCount = 0;
const FOCUSABLE = 'button:not([disabled]), [href], input:not([disabled]), textarea:not([disabled]), select:not([disabled]), [tabindex]:not([tabindex="-1"])';

/**
 * BCMS's modal frame: a dialog with its title, a close button, the content and Cancel / `actionName`
 * (default Done). Escape or Cancel emits `cancel`, the action emits `done` (after `beforeDone()`,
 * when given, allows it). The focus moves into it when it opens and back when it closes.
 */
export const BCMSModalWrapper = defineComponent({
  name: 'BCMSModalWrapper',
  props: {
    class: String,
    show: Boolean,
    title: String,
    actionName: { type: String, default: 'Done' },
    beforeDone: Function as PropType<() => boolean | Promise<boolean>>,
    doNotShowFooter: Boolean,
    allowBodyScroll: { type: Boolean, default: true },
    confirmDisabledButton: { type: Boolean, default: false },
  },
  emits: { cancel: () => true, done: () => true, scroll: (_event: Event) => true },
  setup(props, { emit, slots }) {
    const id = `bcms-ui-modal-${++modalCount}`;
    const dialog = ref<HTMLElement>();
    let returnTo: HTMLElement | null = null;
    const done = async (): Promise<void> => {
      if (props.beforeDone !== undefined && !(await props.beforeDone())) return;
      emit('done');
    };
    const onKey = (event: KeyboardEvent): void => {
      if (event.key === 'Escape') {
        event.stopPropagation();
        emit('cancel');
      } else if (event.key === 'Tab' && dialog.value !== undefined) {
        // The focus stays inside while it is open.
        const items = [...dialog.value.querySelectorAll<HTMLElement>(FOCUSABLE)];
        const first = items[0];
        const last = items[items.length - 1];
        if (event.shiftKey && document.activeElement === first) {
          event.preventDefault();
          last?.focus();
        } else if (!event.shiftKey && document.activeElement === last) {
          event.preventDefault();
          first?.focus();
        }
      }
    };
    watch(
      () => props.show,
      async (show) => {
        if (show) {
          returnTo = document.activeElement as HTMLElement | null;
          await nextTick();
          (dialog.value?.querySelector<HTMLElement>('input, textarea, select') ?? dialog.value?.querySelector<HTMLElement>(FOCUSABLE))?.focus();
        } else if (returnTo?.isConnected) {
          returnTo.focus();
        }
      },
    );
    return () =>
      props.show
        ? h('div', { class: 'bcms-ui-modal-backdrop', onMousedown: (event: MouseEvent) => event.target === event.currentTarget && emit('cancel') }, [
            h('div', { ref: dialog, class: ['bcms-ui-modal', props.class ?? ''], role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': `${id}-title`, onKeydown: onKey }, [
              h('header', { class: 'bcms-ui-modal-header' }, [
                h('h2', { id: `${id}-title` }, props.title ?? ''),
                h('button', { type: 'button', class: 'bcms-ui-modal-close', 'aria-label': 'Close', onClick: () => emit('cancel') }, [h(BCMSIcon, { src: '/close' })]),
              ]),
              h('div', { class: 'bcms-ui-modal-body', onScroll: (event: Event) => emit('scroll', event) }, slot(slots)),
              props.doNotShowFooter
                ? null
                : h('footer', { class: 'bcms-ui-modal-footer' }, [
                    h(BCMSButton, { kind: 'ghost', onClick: () => emit('cancel') }, () => 'Cancel'),
                    h(BCMSButton, { kind: 'primary', disabled: props.confirmDisabledButton, onClick: () => void done() }, () => props.actionName),
                  ]),
            ]),
          ])
        : null;
  },
});

let inputCount = 0;

/** The label, the control, and the helper or error text under it, as BCMS's inputs lay them out. */
function field(id: string, label: string | undefined, control: VNode, invalidText: string | undefined, helperText: string | undefined, className?: string): VNode {
  return h('div', { class: ['bcms-ui-field', className ?? '', invalidText ? 'bcms-ui-invalid' : ''] }, [
    label ? h('label', { for: id, class: 'bcms-ui-label' }, label) : null,
    control,
    invalidText ? h('p', { id: `${id}-error`, class: 'bcms-ui-error', role: 'alert' }, invalidText) : helperText ? h('p', { id: `${id}-help`, class: 'bcms-ui-helper' }, helperText) : null,
  ]);
}

const described = (id: string, invalidText?: string, helperText?: string): string | undefined => (invalidText ? `${id}-error` : helperText ? `${id}-help` : undefined);

const textProps = {
  id: String,
  class: String,
  value: String,
  modelValue: String,
  placeholder: String,
  label: String,
  invalidText: String,
  disabled: Boolean,
  helperText: String,
};

const TEXT_EMITS = { input: (value: string) => typeof value === 'string', enter: () => true, 'update:modelValue': (value: string) => typeof value === 'string' };

type TextEmit = ((event: 'input', value: string) => void) & ((event: 'update:modelValue', value: string) => void) & ((event: 'enter') => void);

/** What a one-line text control has: its value, its state for screen readers, and `input`, `update:modelValue` and `enter` as the user types. */
function typing(
  id: string,
  props: { value?: string; modelValue?: string; placeholder?: string; disabled: boolean; invalidText?: string; helperText?: string },
  emit: TextEmit,
): Record<string, unknown> {
  return {
    id,
    class: 'bcms-ui-input',
    value: props.modelValue ?? props.value ?? '',
    placeholder: props.placeholder,
    disabled: props.disabled,
    'aria-invalid': props.invalidText ? 'true' : undefined,
    'aria-describedby': described(id, props.invalidText, props.helperText),
    onInput: (event: Event) => {
      const value = (event.target as HTMLInputElement).value;
      emit('input', value);
      emit('update:modelValue', value);
    },
    onKeyup: (event: KeyboardEvent) => event.key === 'Enter' && emit('enter'),
  };
}

/** BCMS's text input: `value` (or `v-model`) in, `input` (and `update:modelValue`) out with the text; Enter emits `enter`. */
export const BCMSTextInput = defineComponent({
  name: 'BCMSTextInput',
  props: { ...textProps, type: { type: String, default: 'text' }, focusOnLoad: Boolean },
  emits: TEXT_EMITS,
  setup(props, { emit }) {
    const id = props.id ?? `bcms-ui-input-${++inputCount}`;
    const input = ref<HTMLInputElement>();
    onMounted(() => props.focusOnLoad && input.value?.focus());
    return () => field(id, props.label, h('input', { ref: input, type: props.type, ...typing(id, props, emit) }), props.invalidText, props.helperText, props.class);
  },
});

/** A password input, with a button that shows or hides what was typed. */
export const BCMSPasswordInput = defineComponent({
  name: 'BCMSPasswordInput',
  props: { ...textProps, readonly: { type: Boolean, default: false } },
  emits: TEXT_EMITS,
  setup(props, { emit }) {
    const id = props.id ?? `bcms-ui-input-${++inputCount}`;
    const visible = ref(false);
    return () =>
      field(
        id,
        props.label,
        h('div', { class: 'bcms-ui-password' }, [
          h('input', { ...typing(id, props, emit), type: visible.value ? 'text' : 'password', readonly: props.readonly, autocomplete: 'off' }),
          h('button', { type: 'button', class: 'bcms-ui-password-toggle', 'aria-pressed': String(visible.value), onClick: () => (visible.value = !visible.value) }, visible.value ? 'Hide' : 'Show'),
        ]),
        props.invalidText,
        props.helperText,
        props.class,
      );
  },
});

/** BCMS's text area: grows with its text from `minHeight` pixels. */
export const BCMSTextAreaInput = defineComponent({
  name: 'BCMSTextAreaInput',
  props: { ...textProps, value: { type: String, default: '' }, minHeight: { type: Number, default: 44 } },
  emits: { input: (value: string) => typeof value === 'string', 'update:modelValue': (value: string) => typeof value === 'string' },
  setup(props, { emit }) {
    const id = props.id ?? `bcms-ui-input-${++inputCount}`;
    const grow = (element: HTMLTextAreaElement): void => {
      element.style.height = 'auto';
      element.style.height = `${Math.max(props.minHeight, element.scrollHeight)}px`;
    };
    return () =>
      field(
        id,
        props.label,
        h('textarea', {
          id,
          class: 'bcms-ui-input bcms-ui-textarea',
          style: { minHeight: `${props.minHeight}px` },
          value: props.modelValue ?? props.value,
          placeholder: props.placeholder,
          disabled: props.disabled,
          'aria-invalid': props.invalidText ? 'true' : undefined,
          'aria-describedby': described(id, props.invalidText, props.helperText),
          onInput: (event: Event) => {
            const element = event.target as HTMLTextAreaElement;
            grow(element);
            emit('input', element.value);
            emit('update:modelValue', element.value);
          },
        }),
        props.invalidText,
        props.helperText,
        props.class,
      );
  },
});

/** BCMS's toggle: a switch; `states` names its two states (`['Yes', 'No']`). */
export const BCMSToggleInput = defineComponent({
  name: 'BCMSToggleInput',
  props: {
    label: String,
    modelValue: { type: Boolean, default: undefined },
    value: { type: Boolean, default: false },
    disabled: { type: Boolean, default: false },
    states: Array as PropType<string[]>,
    helperText: String,
  },
  emits: { input: (value: boolean) => typeof value === 'boolean', 'update:modelValue': (value: boolean) => typeof value === 'boolean' },
  setup(props, { emit }) {
    const id = `bcms-ui-input-${++inputCount}`;
    return () => {
      const on = props.modelValue ?? props.value;
      return field(
        id,
        props.label,
        h(
          'button',
          {
            id,
            type: 'button',
            role: 'switch',
            class: ['bcms-ui-toggle', on ? 'bcms-ui-on' : ''],
            'aria-checked': String(on),
            disabled: props.disabled,
            'aria-describedby': described(id, undefined, props.helperText),
            onClick: () => {
              emit('input', !on);
              emit('update:modelValue', !on);
            },
          },
          [h('span', { class: 'bcms-ui-toggle-knob', 'aria-hidden': 'true' }), props.states ? h('span', { class: 'bcms-ui-toggle-state' }, on ? props.states[0] : props.states[1]) : null],
        ),
        undefined,
        props.helperText,
      );
    };
  },
});

/** A code editor: monospaced text, `change` with the code as it is edited (`readOnly`: shown only). */
export const BCMSCodeEditor = defineComponent({
  name: 'BCMSCodeEditor',
  props: { mode: { type: String, default: 'javascript' }, code: { type: String, default: '' }, readOnly: { type: Boolean, default: false } },
  emits: { change: (code: string) => typeof code === 'string' },
  setup(props, { emit }) {
    return () =>
      h('textarea', {
        class: 'bcms-ui-code-editor',
        value: props.code,
        readonly: props.readOnly,
        spellcheck: false,
        'aria-label': `${props.mode} code`,
        'data-mode': props.mode,
        onInput: (event: Event) => emit('change', (event.target as HTMLTextAreaElement).value),
      });
  },
});
