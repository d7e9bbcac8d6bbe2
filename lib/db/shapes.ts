// The BCMS shapes the repository returns: types only, so that browser code (the SDK) can use them too.

/** A template, as BCMS shapes it. Times are epoch milliseconds. */
export interface BcmsTemplate {
  _id: string;
  name: string;
  label: string;
  desc: string;
  singleEntry: boolean;
  props: unknown[];
  createdAt: number;
  updatedAt: number;
}

/** One property value of an entry's language meta, as BCMS shapes it: the prop's id and its data. */
export interface BcmsEntryMetaProp {
  id: string;
  /** Always an array in BCMS: `meta[0].props[0].data[0]` is the first value of the first prop. */
  data: unknown[];
}

/** An entry's props in one language (`lng`), as BCMS shapes it. */
export interface BcmsEntryMeta {
  lng: string;
  props: BcmsEntryMetaProp[];
}

/** An entry, as BCMS shapes it. Times are epoch milliseconds. */
export interface BcmsEntry {
  _id: string;
  templateId: string;
  userId: string;
  status: string;
  meta: BcmsEntryMeta[];
  content: unknown[];
  createdAt: number;
  updatedAt: number;
}
