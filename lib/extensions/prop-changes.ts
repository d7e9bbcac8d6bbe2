/**
 * BCMS's `propChanges` (`sdk.template.update({ _id, propChanges })`): add, update and remove a
 * template's props, in order, as BCMS applies them; and what the change means for the template's
 * entries (a prop added gets its default data in each entry's meta, a prop removed leaves them).
 */
import { randomUUID } from 'node:crypto';
import { BcmsHttpError } from '../http/errors';
import { slugUnderscore } from '../names';

/** A template's prop, as BCMS shapes it. */
export interface BCMSProp {
  id: string;
  type: string;
  required: boolean;
  name: string;
  label: string;
  array: boolean;
  defaultData: unknown;
  [more: string]: unknown;
}

/** One change of `propChanges`. */
export interface BCMSPropChange {
  add?: { label: string; type: string; required: boolean; array: boolean; defaultData?: unknown };
  /** The id of the prop to remove. */
  remove?: string;
  update?: { id: string; label: string; move: number; required: boolean; array?: boolean; enumItems?: string[]; [more: string]: unknown };
}

export interface AppliedPropChanges {
  props: BCMSProp[];
  /** Props added: each entry of the template gets `{ id, data: defaultData }`. */
  added: BCMSProp[];
  /** Ids of the props removed: each entry of the template loses them. */
  removed: string[];
}

const bad = (message: string): BcmsHttpError => new BcmsHttpError('BAD_REQUEST', message);

/** Applies `changes` to a copy of `props`; throws a 400 naming the change that cannot apply. */
export function applyPropChanges(props: readonly unknown[], changes: readonly unknown[]): AppliedPropChanges {
  const next = props.map((prop) => ({ ...(prop as BCMSProp) }));
  const added: BCMSProp[] = [];
  const removed: string[] = [];
  changes.forEach((value, i) => {
    const at = `body.propChanges[${i}]`;
    if (value === null || typeof value !== 'object') throw bad(`${at} must be an object with add, update or remove.`);
    const change = value as BCMSPropChange;
    if (change.add !== undefined) {
      const { label, type, required, array, defaultData } = change.add;
      if (typeof label !== 'string' || label.trim() === '') throw bad(`${at}.add.label must be a non-empty string.`);
      if (typeof type !== 'string' || type === '') throw bad(`${at}.add.type must be a prop type (STRING, NUMBER, BOOLEAN...).`);
      const name = slugUnderscore(label);
      if (next.some((prop) => prop.name === name)) throw bad(`${at}: the template has a prop named "${name}" already.`);
      const prop: BCMSProp = { id: randomUUID(), type, required: required === true, name, label, array: array === true, defaultData: defaultData ?? [] };
      next.push(prop);
      added.push(prop);
    } else if (change.update !== undefined) {
      const { id, label, move, required, array, ...rest } = change.update;
      const index = next.findIndex((prop) => prop.id === id);
      if (index === -1) throw bad(`${at}.update.id: the template has no prop ${JSON.stringify(id)}.`);
      const prop = next[index] as BCMSProp;
      if (typeof label === 'string' && label.trim() !== '' && label !== prop.label) {
        const name = slugUnderscore(label);
        if (next.some((other) => other !== prop && other.name === name)) throw bad(`${at}: the template has a prop named "${name}" already.`);
        prop.label = label;
        prop.name = name;
      }
      if (typeof required === 'boolean') prop.required = required;
      if (typeof array === 'boolean') prop.array = array;
      for (const [key, extra] of Object.entries(rest)) if (extra !== undefined) prop[key] = extra;
      if (typeof move === 'number' && Number.isInteger(move) && move !== 0) {
        next.splice(index, 1);
        next.splice(Math.max(0, Math.min(next.length, index + move)), 0, prop);
      }
    } else if (change.remove !== undefined) {
      const index = next.findIndex((prop) => prop.id === change.remove);
      if (index === -1) throw bad(`${at}.remove: the template has no prop ${JSON.stringify(change.remove)}.`);
      next.splice(index, 1);
      removed.push(change.remove);
    } else {
      throw bad(`${at} must have add, update or remove.`);
    }
  });
  return { props: next, added, removed };
}

/** An entry's meta once the template's props changed: added props with their default data, removed ones gone. */
export function metaAfterPropChanges<M extends { props: { id: string; data: unknown[] }[] }>(meta: readonly M[], applied: AppliedPropChanges): M[] {
  return meta.map((lang) => ({
    ...lang,
    props: [
      ...lang.props.filter((prop) => !applied.removed.includes(prop.id)),
      ...applied.added.filter((prop) => !lang.props.some((has) => has.id === prop.id)).map((prop) => ({ id: prop.id, data: Array.isArray(prop.defaultData) ? prop.defaultData : [] })),
    ],
  }));
}
