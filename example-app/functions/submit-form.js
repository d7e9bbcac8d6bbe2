'use strict';
// A private function: a contact form's submission, stored as an entry of the form-submissions
// template. A server (the site's contact page, say) signs its calls with an API key that lists
// this function; a signed-in user's browser may send a token whose role holds EXECUTE instead.
const { createBcmsFunction } = require('bcms-extensions');
const { SUBMISSIONS_TEMPLATE } = require('../seed');

const FIELDS = ['name', 'email', 'message'];

module.exports = createBcmsFunction(async () => ({
  // responseSchema: what `result` holds, for the OpenAPI document and typed clients.
  config: { name: 'submit-form', public: false, responseSchema: { submissionId: { __type: 'string', __required: true } } },
  handler: async ({ request, repo, errorHandler, auth }) => {
    const body = request.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw errorHandler.occurred(400, 'Send a JSON object: { "name", "email", "message" }.');
    }
    for (const field of FIELDS) {
      if (typeof body[field] !== 'string' || body[field].trim() === '') throw errorHandler.occurred(400, `Field "${field}" is required.`);
    }
    if (!/^[^@\s]+@[^@\s]+$/.test(body.email)) throw errorHandler.occurred(400, 'Field "email" is not an email address.');
    const template = await repo.template.findByName(SUBMISSIONS_TEMPLATE);
    const entry = await repo.entry.add({
      templateId: template._id,
      // Who sent it: the user of the token, or the API key that signed the call.
      userId: auth.type === 'jwt' ? auth.accessToken.payload.userId : `api-key:${auth.key.id}`,
      status: 'new',
      meta: [{ lng: 'en', props: FIELDS.map((field) => ({ id: field, data: [body[field].trim()] })) }],
    });
    return { submissionId: entry._id };
  },
}));
