import { defineComponent, onMounted, ref } from 'vue';
import type { BcmsEntry, BcmsSdkError } from 'bcms-extensions/sdk';

/** As the plugin's own endpoint, GET /api/plugin/content-stats/stats/counts, answers. */
interface TemplateCount {
  template: string;
  label: string;
  entries: number;
}

interface Submission {
  id: string;
  name: string;
  email: string;
  message: string;
  createdAt: number;
}

const SUBMISSIONS_TEMPLATE = 'form-submissions';
/** Short, so that the table's four columns fit a phone-wide frame (11/27/26, 8:27 AM). */
const RECEIVED = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'short' });

/** A submission's fields, read from its entry's first meta item (as submit-form writes them). */
function toSubmission(entry: BcmsEntry): Submission {
  const field = (id: string) => String(entry.meta[0]?.props.find((prop) => prop.id === id)?.data[0] ?? '');
  return { id: entry._id, name: field('name'), email: field('email'), message: field('message'), createdAt: entry.createdAt };
}

/**
 * Entries per template as horizontal bars; the numbers are in its accessible name too. HTML, not a
 * fixed-size SVG: the bars shrink with the frame (a phone's is under 400 px wide) and the text does not.
 */
const Chart = defineComponent({
  props: { counts: { type: Array as () => TemplateCount[], required: true } },
  setup(props) {
    return () => {
      const max = Math.max(1, ...props.counts.map((count) => count.entries));
      const summary = props.counts.map((count) => `${count.label || count.template}: ${count.entries}`).join(', ');
      return (
        <div class="bars" role="img" aria-label={`Entries per template. ${summary}`} data-testid="chart">
          {props.counts.map((count) => (
            <div class="bar-row" key={count.template}>
              <span class="bar-label">{count.label || count.template}</span>
              <span class="bar-track">
                {/* The track's width less room for the number, in proportion to the largest count. */}
                <span class="bar" style={{ width: `max(2px, calc((100% - 3rem) * ${count.entries / max}))` }} />
                <span data-testid="chart-value">{count.entries}</span>
              </span>
            </div>
          ))}
        </div>
      );
    };
  },
});

export const App = defineComponent({
  setup() {
    const sdk = window.bcms.sdk;
    const state = ref<'loading' | 'ready' | 'error'>('loading');
    const error = ref('');
    const counts = ref<TemplateCount[]>([]);
    const submissions = ref<Submission[]>([]);
    const form = ref({ name: '', email: '', message: '' });
    const sending = ref(false);
    const status = ref('');

    async function load(): Promise<void> {
      try {
        // The counts from the plugin's own endpoint (a BCMS-relative URL: send puts /api in front);
        // the submissions through the SDK's entry reads.
        const [stats, templates] = await Promise.all([sdk.send<{ counts: TemplateCount[] }>({ url: '/plugin/content-stats/stats/counts' }), sdk.template.getAll()]);
        counts.value = stats.counts;
        const form = templates.find((template) => template.name === SUBMISSIONS_TEMPLATE);
        submissions.value = (form === undefined ? [] : await sdk.entry.getAllByTemplateId({ templateId: form._id }))
          .map(toSubmission)
          .sort((a, b) => b.createdAt - a.createdAt)
          .slice(0, 10);
        state.value = 'ready';
      } catch (caught) {
        const failure = caught as BcmsSdkError;
        error.value = failure.status === 401 ? 'you are signed out: sign in through the admin shell (/bcms).' : failure.message;
        state.value = 'error';
      }
    }

    async function send(event: Event): Promise<void> {
      event.preventDefault();
      sending.value = true;
      status.value = 'Sending…';
      try {
        const result = await sdk.function.call<{ submissionId: string }>('submit-form', { ...form.value });
        status.value = `Stored as ${result.submissionId}.`;
        form.value = { name: '', email: '', message: '' };
        await load();
      } catch (caught) {
        status.value = `Not sent: ${(caught as Error).message}`;
      } finally {
        sending.value = false;
      }
    }

    onMounted(load);

    const input = (field: 'name' | 'email' | 'message', label: string, type = 'text') => [
      <label for={`field-${field}`}>{label}</label>,
      <input id={`field-${field}`} type={type} required value={form.value[field]} onInput={(event: Event) => (form.value[field] = (event.target as HTMLInputElement).value)} />,
    ];

    return () => (
      <main aria-busy={state.value === 'loading'}>
        <h1>Content stats</h1>
        {state.value === 'loading' && <p role="status">Loading content…</p>}
        {state.value === 'error' && (
          <p role="alert" class="error">
            Could not load the content: {error.value}
          </p>
        )}
        {state.value === 'ready' && [
          <section aria-labelledby="chart-title">
            <h2 id="chart-title">Entries per template</h2>
            <Chart counts={counts.value} />
          </section>,
          <section>
            {/* Text too long for a phone still fits: the table scrolls sideways in its own box (by keyboard too), never the page. */}
            <section class="table-scroll" aria-labelledby="submissions-caption" tabindex="0">
              <table data-testid="submissions">
                <caption id="submissions-caption">Recent form submissions</caption>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Email</th>
                    <th scope="col">Message</th>
                    <th scope="col">Received</th>
                  </tr>
                </thead>
                <tbody>
                  {submissions.value.length === 0 ? (
                    <tr>
                      <td colspan={4}>No submissions yet.</td>
                    </tr>
                  ) : (
                    submissions.value.map((submission) => (
                      <tr key={submission.id}>
                        <td>{submission.name}</td>
                        <td class="email">{submission.email}</td>
                        <td>{submission.message}</td>
                        <td>{RECEIVED.format(submission.createdAt)}</td>
                      </tr>
                    ))
                  )}
                </tbody>
              </table>
            </section>
          </section>,
          <section aria-labelledby="send-title">
            <h2 id="send-title">Send a submission through the submit-form function</h2>
            <form onSubmit={send}>
              {input('name', 'Name')}
              {input('email', 'Email', 'email')}
              {input('message', 'Message')}
              <button type="submit" disabled={sending.value}>
                Send
              </button>
              <p role="status" class="status">
                {status.value}
              </p>
            </form>
          </section>,
        ]}
      </main>
    );
  },
});
