/** The types BCMS plugin UIs import from `@becomes/cms-ui/types`. */
import type { BcmsGlobal } from 'bcms-extensions/sdk/types';

/** What a modal's `show(data)` takes besides its own data: the title, and what Done and Cancel do. */
export interface BCMSModalInputDefaults<OutputData> {
  title?: string;
  onDone?(data: OutputData): void | Promise<void>;
  onCancel?(): void | Promise<void>;
}

/** A registered modal (`window.bcms.modal.custom.<name>`): its component fills in `show` and `hide`. */
export interface BCMSModalServiceItem<OutputData, InputData extends BCMSModalInputDefaults<OutputData> = BCMSModalInputDefaults<OutputData>> {
  show(data: InputData): void;
  hide(): void;
  subscribe?(eventName: string, handler: (event: Event) => void): () => void;
  triggerEvent?(eventName: string, event: Event): void;
}

/** A query of the store's getters (`user_findOne((user) => ...)`). */
export type BCMSStoreGetterQuery<Item> = (item: Item) => boolean;

/** `window.bcms`, with the plugin's own modals typed: `declare global { interface Window { bcms: BCMSGlobalScopeMain<CustomModals> } }`. */
export type BCMSGlobalScopeMain<CustomModals = Record<string, never>> = Omit<BcmsGlobal, 'modal'> & {
  modal: Omit<BcmsGlobal['modal'], 'custom'> & { custom: CustomModals };
};
