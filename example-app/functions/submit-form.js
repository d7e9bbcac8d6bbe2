'use strict';
// A private function: a contact form's submission, stored as an entry of the form-submissions
// template. Callers sign in first and send a token whose role holds EXECUTE.
const { createBcmsFunction } = require('bcms-extensions');
const { SUBMISSIONS_TEMPLATE } = require('../seed');

const FIELDS = ['name', 'email', 'message'];

module.exports = createBcmsFunction(async () => ({
  config: { name: 'submit-form', public: false },
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
      userId: auth.accessToken.payload.userId,
      status: 'new',
      meta: [{ lng: 'en', props: FIELDS.map((field) => ({ id: field, data: [body[field].trim()] })) }],
    });
    return { submissionId: entry._id };
  },
}));
