// Type-level test: window.bcms in a plugin UI's .tsx, written against BCMS's SDK names and shapes
// (@becomes/cms-sdk 3.4.3, BCMS's plugin-starter), with no cast and no declaration of its own.
import { expectTypeOf } from 'expect-type';
import { defineComponent, onMounted, ref } from 'vue';
import type { BcmsEntry, BcmsEntryLite, BcmsGlobal, BcmsJwt, BcmsSdkError, BcmsSdkFunction, BcmsSdkPlugin, BcmsTemplate, BcmsUser } from 'bcms-extensions/sdk';

// As BCMS's plugin UIs start.
window.bcms = window.parent.bcms;
expectTypeOf(window.bcms).toEqualTypeOf<BcmsGlobal>();
expectTypeOf(window.bcms.origin).toEqualTypeOf<string>();
expectTypeOf(window.bcms.confirm('Delete it?', 'It cannot be undone.')).toEqualTypeOf<Promise<boolean>>();
expectTypeOf(window.bcms.notification.success).toEqualTypeOf<(text: string) => void>();
expectTypeOf(window.bcms.notification.error).toEqualTypeOf<(text: string) => void>();

const sdk = window.bcms.sdk;
expectTypeOf(sdk.isLoggedIn()).toEqualTypeOf<Promise<boolean>>();
expectTypeOf(sdk.getAccessToken()).toEqualTypeOf<BcmsJwt | null>();
expectTypeOf(sdk.getAccessToken()?.payload.userId).toEqualTypeOf<string | undefined>();
expectTypeOf(sdk.user.get()).toEqualTypeOf<Promise<BcmsUser>>();
expectTypeOf(sdk.plugin.getAll()).toEqualTypeOf<Promise<BcmsSdkPlugin[]>>();
expectTypeOf<BcmsSdkPlugin>().toHaveProperty('policies');
expectTypeOf(sdk.function.getAll()).toEqualTypeOf<Promise<BcmsSdkFunction[]>>();
expectTypeOf(sdk.function.call<{ submissionId: string }>('submit-form', { name: 'Ada' })).toEqualTypeOf<Promise<{ submissionId: string }>>();

expectTypeOf(sdk.template.getAll()).toEqualTypeOf<Promise<BcmsTemplate[]>>();
expectTypeOf(sdk.template.get('id')).toEqualTypeOf<Promise<BcmsTemplate>>();
expectTypeOf(sdk.template.getMany(['a', 'b'])).toEqualTypeOf<Promise<BcmsTemplate[]>>();
expectTypeOf(sdk.template.count()).toEqualTypeOf<Promise<number>>();
expectTypeOf(sdk.template.create({ label: 'Todo', desc: '', singleEntry: false })).toEqualTypeOf<Promise<BcmsTemplate>>();
expectTypeOf(sdk.template.update({ _id: 'id', label: 'Todos' })).toEqualTypeOf<Promise<BcmsTemplate>>();
expectTypeOf(sdk.template.deleteById('id')).toEqualTypeOf<Promise<true>>();

expectTypeOf(sdk.entry.getAllByTemplateId({ templateId: 'id' })).toEqualTypeOf<Promise<BcmsEntry[]>>();
expectTypeOf(sdk.entry.getAllLite({ templateId: 'id' })).toEqualTypeOf<Promise<BcmsEntryLite[]>>();
expectTypeOf(sdk.entry.get({ templateId: 't', entryId: 'e' })).toEqualTypeOf<Promise<BcmsEntry>>();
expectTypeOf(sdk.entry.count({ templateId: 't' })).toEqualTypeOf<Promise<number>>();
expectTypeOf(sdk.entry.create({ templateId: 't', meta: [{ lng: 'en', props: [{ id: 'title', data: ['Hi'] }] }] })).toEqualTypeOf<Promise<BcmsEntry>>();
expectTypeOf(sdk.entry.update({ _id: 'e', templateId: 't', status: 'done' })).toEqualTypeOf<Promise<BcmsEntry>>();
expectTypeOf(sdk.entry.deleteById({ templateId: 't', entryId: 'e' })).toEqualTypeOf<Promise<true>>();

expectTypeOf(sdk.send<{ items: string[] }>({ url: '/plugin/bcms-plugin---name/todo/all', headers: { Authorization: '' } })).toEqualTypeOf<Promise<{ items: string[] }>>();
expectTypeOf(sdk.send({ url: '/plugin/x/todo', method: 'PUT', data: { _id: 'a', done: true }, headers: { Authorization: '' } })).toEqualTypeOf<Promise<unknown>>();

// The positional forms are gone: BCMS takes objects.
// @ts-expect-error: an entry is found by { templateId, entryId }
void sdk.entry.get('template', 'entry');
// @ts-expect-error: entries of a template are asked for with { templateId }
void sdk.entry.getAllByTemplateId('template');
// @ts-expect-error: send takes { url, method?, data?, headers? }
void sdk.send('/plugin/x/y');
// @ts-expect-error: an entry needs its meta
void sdk.entry.create({ templateId: 't' });
// @ts-expect-error: a template needs a label
void sdk.template.create({ name: 'todo' });
// @ts-expect-error: getAccessToken is synchronous, the decoded token (BCMS's), not a string
expectTypeOf(sdk.getAccessToken()).toEqualTypeOf<string | null>();

interface Todo {
  _id: string;
  description: string;
  done: boolean;
  createdAt: number;
}

// As the plugin-starter writes its todo view: throwable around the call, the result to onSuccess.
export const Todos = defineComponent({
  setup() {
    const todos = ref<Todo[]>([]);
    const titles = ref<string[]>([]);
    onMounted(async () => {
      await window.bcms.util.throwable(
        async () => window.bcms.sdk.send<{ items: Todo[] }>({ url: '/plugin/bcms-plugin---name/todo/all', headers: { Authorization: '' } }),
        async (result) => {
          expectTypeOf(result).toEqualTypeOf<{ items: Todo[] }>();
          todos.value = result.items;
        },
      );
      await window.bcms.util.throwable(
        async () => {
          const templates = await window.bcms.sdk.template.getAll();
          let todoTemplate = templates.find((e) => e.name === 'todo');
          if (!todoTemplate) todoTemplate = await window.bcms.sdk.template.create({ desc: '', label: 'Todo', singleEntry: false });
          else todoTemplate = await window.bcms.sdk.template.update(todoTemplate);
          return window.bcms.sdk.entry.getAllByTemplateId({ templateId: todoTemplate._id });
        },
        async (entries) => {
          titles.value = entries.map((entry) => String(entry.meta[0]?.props[0]?.data[0] ?? ''));
        },
        async (error) => {
          window.bcms.notification.error((error as BcmsSdkError).message);
        },
      );
    });
    async function remove(todo: Todo): Promise<void> {
      if (!(await window.bcms.confirm('Delete todo', `Delete "${todo.description}"?`))) return;
      await window.bcms.util.throwable(async () => window.bcms.sdk.send({ url: `/plugin/bcms-plugin---name/todo/${todo._id}`, method: 'DELETE', headers: { Authorization: '' } }));
      window.bcms.notification.success('Deleted.');
    }
    return () => (
      <ul>
        {todos.value.map((todo) => (
          <li>
            {todo.description}{' '}
            <button type="button" onClick={() => remove(todo)}>
              Delete
            </button>
          </li>
        ))}
        {titles.value.map((title) => (
          <li>{title}</li>
        ))}
      </ul>
    );
  },
});
