// A plugin UI written as BCMS's plugin-starter writes its todo UI: every call inside
// window.bcms.util.throwable (an error becomes an error notification), sdk.send to the plugin's own
// back end with BCMS-relative URLs and `Authorization: ''`, templates and entries through
// sdk.template / sdk.entry, a delete behind window.bcms.confirm.
import { computed, defineComponent, onMounted, ref, type PropType } from 'vue';
import type { BcmsEntry, BcmsTemplate } from 'bcms-extensions/sdk';

/** As the plugin's back end answers (test/ui/todo-plugin.test.ts). */
interface Todo {
  _id: string;
  description: string;
  done: boolean;
  createdAt: number;
}

const auth = { Authorization: '' };

const TodoItem = defineComponent({
  props: { item: { type: Object as PropType<Todo>, required: true } },
  emits: { done: () => true, remove: () => true },
  setup(props, ctx) {
    return () => (
      <li class={props.item.done ? 'done' : ''}>
        <input id={`done-${props.item._id}`} type="checkbox" checked={props.item.done} onChange={() => ctx.emit('done')} />
        <label class="text" for={`done-${props.item._id}`}>
          {props.item.description}
        </label>
        <button type="button" class="danger" aria-label={`Delete ${props.item.description}`} onClick={() => ctx.emit('remove')}>
          Delete
        </button>
      </li>
    );
  },
});

export const App = defineComponent({
  setup() {
    const sdk = window.bcms.sdk;
    const rawTodos = ref<Todo[]>([]);
    const todos = computed(() => [...rawTodos.value].sort((a, b) => a.createdAt - b.createdAt));
    const description = ref('');
    const descriptionInput = ref<HTMLInputElement | null>(null);
    const user = ref('');
    const notesTemplate = ref<BcmsTemplate | null>(null);
    const notes = ref<BcmsEntry[]>([]);
    const noteCount = ref(0);
    const note = ref('');
    const noteText = (entry: BcmsEntry) => String(entry.meta[0]?.props.find((prop) => prop.id === 'text')?.data[0] ?? '');

    async function loadNotes(template: BcmsTemplate): Promise<void> {
      const [all, count] = await Promise.all([sdk.entry.getAllByTemplateId({ templateId: template._id }), sdk.entry.count({ templateId: template._id })]);
      notes.value = all;
      noteCount.value = count;
    }

    onMounted(async () => {
      await window.bcms.util.throwable(
        async () => sdk.send<{ items: Todo[] }>({ url: '/plugin/bcms-plugin---name/todo/all', headers: auth }),
        async (result) => {
          rawTodos.value = result.items;
        },
      );
      await window.bcms.util.throwable(
        async () => {
          const [me, templates] = await Promise.all([sdk.user.get(), sdk.template.getAll()]);
          user.value = me.username || me.email;
          // The plugin's template, made on first use (as the plugin-starter's todo-from-entry view does).
          const template =
            templates.find((candidate) => candidate.name === 'notes') ?? (await sdk.template.create({ label: 'Notes', name: 'notes', desc: 'Notes of the todo plugin', singleEntry: false }));
          await loadNotes(template);
          return template;
        },
        async (template) => {
          notesTemplate.value = template;
        },
      );
    });

    async function addTodo(event: Event): Promise<void> {
      event.preventDefault();
      await window.bcms.util.throwable(
        async () => sdk.send<{ item: Todo }>({ url: '/plugin/bcms-plugin---name/todo', method: 'POST', headers: auth, data: { description: description.value } }),
        async (result) => {
          rawTodos.value.push(result.item);
          description.value = '';
          window.bcms.notification.success(`Added "${result.item.description}".`);
        },
      );
    }

    async function toggleDone(todo: Todo): Promise<void> {
      await window.bcms.util.throwable(
        async () => sdk.send<{ item: Todo }>({ url: '/plugin/bcms-plugin---name/todo', method: 'PUT', headers: auth, data: { _id: todo._id, done: !todo.done } }),
        async (result) => {
          rawTodos.value = rawTodos.value.map((item) => (item._id === todo._id ? result.item : item));
        },
      );
    }

    async function removeTodo(todo: Todo): Promise<void> {
      if (!(await window.bcms.confirm('Delete todo', `Delete "${todo.description}"? This cannot be undone.`))) return;
      await window.bcms.util.throwable(
        async () => sdk.send({ url: `/plugin/bcms-plugin---name/todo/${encodeURIComponent(todo._id)}`, method: 'DELETE', headers: auth }),
        async () => {
          rawTodos.value = rawTodos.value.filter((item) => item._id !== todo._id);
          window.bcms.notification.info(`Deleted "${todo.description}".`);
          // Its button is gone: the keyboard goes on from the form.
          descriptionInput.value?.focus();
        },
      );
    }

    async function addNote(event: Event): Promise<void> {
      event.preventDefault();
      const template = notesTemplate.value;
      if (template === null) return;
      await window.bcms.util.throwable(
        async () => {
          await sdk.entry.create({ templateId: template._id, status: 'active', meta: [{ lng: 'en', props: [{ id: 'text', data: [note.value] }] }] });
          await loadNotes(template);
        },
        async () => {
          note.value = '';
          window.bcms.notification.success('Note saved.');
        },
      );
    }

    async function archiveNote(entry: BcmsEntry): Promise<void> {
      const template = notesTemplate.value as BcmsTemplate;
      await window.bcms.util.throwable(async () => {
        await sdk.entry.update({ _id: entry._id, templateId: entry.templateId, status: 'archived', meta: entry.meta });
        await loadNotes(template);
      });
    }

    async function removeNote(entry: BcmsEntry): Promise<void> {
      const template = notesTemplate.value as BcmsTemplate;
      if (!(await window.bcms.confirm('Delete note', `Delete "${noteText(entry)}"?`))) return;
      await window.bcms.util.throwable(
        async () => {
          await sdk.entry.deleteById({ templateId: template._id, entryId: entry._id });
          await loadNotes(template);
        },
        async () => window.bcms.notification.info('Note deleted.'),
      );
    }

    const list = (title: string, items: Todo[]) => (
      <section aria-labelledby={`${title}-title`}>
        <h2 id={`${title}-title`}>{`${title} (${items.length})`}</h2>
        <ul aria-label={title}>
          {items.length === 0 ? <li class="empty">Nothing here.</li> : items.map((todo) => <TodoItem key={todo._id} item={todo} onDone={() => toggleDone(todo)} onRemove={() => removeTodo(todo)} />)}
        </ul>
      </section>
    );

    return () => (
      <main>
        <h1>Todos</h1>
        <p class="user">{user.value === '' ? '' : `Signed in as ${user.value}`}</p>
        <form onSubmit={addTodo} aria-label="New todo">
          <label for="todo-description">Description</label>
          <input
            id="todo-description"
            ref={descriptionInput}
            type="text"
            required
            value={description.value}
            onInput={(event: Event) => (description.value = (event.target as HTMLInputElement).value)}
          />
          <button type="submit">Add</button>
        </form>
        <div class="columns">
          {list(
            'Todo',
            todos.value.filter((todo) => !todo.done),
          )}
          {list(
            'Done',
            todos.value.filter((todo) => todo.done),
          )}
        </div>
        <section aria-labelledby="notes-title">
          <h2 id="notes-title">{`Notes (${noteCount.value})`}</h2>
          <ul aria-label="Notes">
            {notes.value.map((entry) => (
              <li key={entry._id}>
                <span class="text">
                  {noteText(entry)} <small>({entry.status})</small>
                </span>
                {entry.status !== 'archived' && (
                  <button type="button" class="secondary" aria-label={`Archive ${noteText(entry)}`} onClick={() => archiveNote(entry)}>
                    Archive
                  </button>
                )}
                <button type="button" class="danger" aria-label={`Delete note ${noteText(entry)}`} onClick={() => removeNote(entry)}>
                  Delete
                </button>
              </li>
            ))}
          </ul>
          <form onSubmit={addNote} aria-label="New note">
            <label for="note-text">Note</label>
            <input id="note-text" type="text" required value={note.value} onInput={(event: Event) => (note.value = (event.target as HTMLInputElement).value)} />
            <button type="submit" disabled={notesTemplate.value === null}>
              Save note
            </button>
          </form>
        </section>
      </main>
    );
  },
});
