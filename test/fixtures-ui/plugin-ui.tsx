// Type-level test: window.bcms.sdk in a plugin UI's .tsx, with no cast and no declaration of its own.
import { expectTypeOf } from 'expect-type';
import { defineComponent, ref } from 'vue';
import type { BcmsEntry, BcmsSdkError, BcmsSdkFunction, BcmsSdkPlugin, BcmsTemplate } from 'bcms-extensions/sdk';

const sdk = window.bcms.sdk;
expectTypeOf(sdk.isLoggedIn()).toEqualTypeOf<boolean>();
expectTypeOf(sdk.getAccessToken()).toEqualTypeOf<string | null>();
expectTypeOf(sdk.plugin.getAll()).toEqualTypeOf<Promise<BcmsSdkPlugin[]>>();
expectTypeOf(sdk.function.getAll()).toEqualTypeOf<Promise<BcmsSdkFunction[]>>();
expectTypeOf(sdk.function.call<{ submissionId: string }>('submit-form', { name: 'Ada' })).toEqualTypeOf<Promise<{ submissionId: string }>>();
expectTypeOf(sdk.template.getAll()).toEqualTypeOf<Promise<BcmsTemplate[]>>();
expectTypeOf(sdk.template.get('id')).toEqualTypeOf<Promise<BcmsTemplate>>();
expectTypeOf(sdk.entry.getAllByTemplateId('id')).toEqualTypeOf<Promise<BcmsEntry[]>>();
expectTypeOf(sdk.entry.get('template', 'entry')).toEqualTypeOf<Promise<BcmsEntry>>();
expectTypeOf(sdk.send<{ ok: true }>({ url: '/api/plugin/x/y', method: 'POST', data: {} })).toEqualTypeOf<Promise<{ ok: true }>>();
// @ts-expect-error: an entry is found by its template and its own id
void sdk.entry.get('only-one');
// @ts-expect-error: send takes { url, method?, data? }
void sdk.send('/api/plugin/x/y');

export const Titles = defineComponent({
  setup() {
    const titles = ref<string[]>([]);
    const failure = ref<BcmsSdkError | null>(null);
    sdk.entry
      .getAllByTemplateId('blog')
      .then((entries) => (titles.value = entries.map((entry) => String(entry.meta[0]?.props[0]?.data[0] ?? ''))))
      .catch((error: BcmsSdkError) => (failure.value = error));
    return () => (failure.value ? <p role="alert">{failure.value.status}</p> : <ul>{titles.value.map((title) => <li>{title}</li>)}</ul>);
  },
});
