import { kind, TEMPLATE_FIELD_LENGTHS } from '../db/values';
import type { BcmsEntryMeta } from '../db/shapes';
import type { ObjectSchema } from '../schema/object-schema';

// What the SDK's writes (`/api/extensions/templates`, `.../entries`) take: BCMS's ObjectSchemas,
// checked by the body-check guard before a handler runs, so a bad body is a 400 naming its field.

export interface TemplateCreateBody {
  label: string;
  name?: string;
  desc?: string;
  singleEntry?: boolean;
  props?: unknown[];
}

export interface TemplateUpdateBody extends Partial<TemplateCreateBody> {
  _id: string;
  /** BCMS's prop changes (add, update, remove), applied in order (lib/extensions/prop-changes.ts). */
  propChanges?: unknown[];
}

export interface EntryCreateBody {
  status?: string;
  meta: BcmsEntryMeta[];
  content?: unknown[];
}

export interface EntryUpdateBody extends Partial<EntryCreateBody> {
  _id: string;
  /** BCMS's SDK sends it; the path names the template, and a different one here is refused. */
  templateId?: string;
}

const TEMPLATE_FIELDS: ObjectSchema = {
  name: { __type: 'string', __required: false },
  desc: { __type: 'string', __required: false },
  singleEntry: { __type: 'boolean', __required: false },
  props: { __type: 'array', __required: false, __child: { __type: 'object' } },
};

export const TEMPLATE_CREATE_SCHEMA: ObjectSchema = {
  label: { __type: 'string', __required: true },
  ...TEMPLATE_FIELDS,
};

export const TEMPLATE_UPDATE_SCHEMA: ObjectSchema = {
  _id: { __type: 'string', __required: true },
  label: { __type: 'string', __required: false },
  ...TEMPLATE_FIELDS,
  propChanges: { __type: 'array', __required: false, __child: { __type: 'object' } },
};

/** `[{ lng, props: [{ id, data }] }]`; `data` (an array of anything) is checked by {@link checkMetaData}. */
const META = (required: boolean): ObjectSchema[string] => ({
  __type: 'array',
  __required: required,
  __child: {
    __type: 'object',
    __content: {
      lng: { __type: 'string', __required: true },
      props: {
        __type: 'array',
        __required: true,
        __child: { __type: 'object', __content: { id: { __type: 'string', __required: true } } },
      },
    },
  },
});

const ENTRY_FIELDS: ObjectSchema = {
  status: { __type: 'string', __required: false },
  content: { __type: 'array', __required: false, __child: { __type: 'object' } },
};

export const ENTRY_CREATE_SCHEMA: ObjectSchema = {
  ...ENTRY_FIELDS,
  meta: META(true),
};

export const ENTRY_UPDATE_SCHEMA: ObjectSchema = {
  _id: { __type: 'string', __required: true },
  templateId: { __type: 'string', __required: false },
  ...ENTRY_FIELDS,
  meta: META(false),
};

/**
 * What an ObjectSchema cannot say: each prop's `data` is an array (of any values; BCMS reads
 * `data[0]`). `null` when every one is; else the message naming the first that is not.
 */
export function checkMetaData(meta: readonly BcmsEntryMeta[] | undefined): string | null {
  for (const [i, lng] of (meta ?? []).entries()) {
    for (const [j, prop] of lng.props.entries()) {
      if (!Array.isArray(prop.data)) return `body.meta[${i}].props[${j}].data must be an array, got ${prop.data === undefined ? 'nothing' : kind(prop.data)}.`;
    }
  }
  return null;
}

/**
 * What an ObjectSchema cannot say either: a template's `label`, `name` and `desc` are no longer than
 * TEMPLATE_FIELD_LENGTHS (200, 200 and 5,000 characters). `null` when none is longer; else the
 * message naming the first that is.
 */
export function checkTemplateLengths(body: Partial<Pick<TemplateCreateBody, 'label' | 'name' | 'desc'>>): string | null {
  for (const field of ['label', 'name', 'desc'] as const) {
    const value = body[field];
    const max = TEMPLATE_FIELD_LENGTHS[field];
    if (typeof value === 'string' && value.length > max) return `body.${field} is longer than ${max} characters (it has ${value.length}).`;
  }
  return null;
}

/**
 * A template's name from its label, as BCMS's back end makes it (`StringUtility.toSlugUnderscore`):
 * lower case, spaces and `-` to `_`, then every character other than `a-z`, `0-9` and `_` dropped.
 * `Blog posts` → `blog_posts`; `Café-Menü` → `caf_men`.
 */
export function templateNameOf(label: string): string {
  return label
    .toLowerCase()
    .replace(/ /g, '_')
    .replace(/-/g, '_')
    .replace(/[^0-9a-z_]+/g, '');
}
