// A form that creates something with an Idempotency-Key (§2). The key is made when the form
// opens and shown beside the button; every submission of the same attempt sends it again, so
// a double click, a resubmission after a network error or a retry after a 503 charges once.
// Only an answer that settles the attempt (success, a decline, a stored refusal) makes a new
// key for the next one.
import { ApiError, NetworkError } from './api.js';
import { h } from './dom.js';

// Answers the server stores with the key: resending the same key would replay them, so the
// user's next try is a new attempt with a new key. Everything else (400 validation, 404, 409
// request_in_progress, 5xx, no answer at all) leaves the key as it is, and a retry is safe.
function settlesAttempt(err) {
  if (!(err instanceof ApiError)) return false;
  if (err.status === 409) return err.code !== 'request_in_progress';
  return err.status === 402 || err.status === 422;
}

// Input the page refuses before sending anything (an amount it cannot read).
export class InputError extends Error {}

export function problemNodes(err) {
  if (err instanceof NetworkError) {
    return [h('strong', {}, 'No answer from the server. '), err.message,
      '. It may or may not have gone through: submitting again is safe, it reuses the same Idempotency-Key.'];
  }
  const nodes = [err.message];
  if (err instanceof ApiError) {
    nodes.push(' (', h('code', { class: 'problem-code' }, err.code), ')');
    const p = err.problem;
    if (p.decline_code) nodes.push(' — decline code ', h('code', {}, p.decline_code));
    if (p.param) nodes.push(' — parameter ', h('code', {}, p.param));
    if (err.status === 503 || err.code === 'request_in_progress') {
      nodes.push('. Submitting again is safe: it reuses the same Idempotency-Key.');
    }
  }
  return nodes;
}

export class IdempotentForm {
  // form, keyEl (shows the key), problemEl, submitButton; submit(key) does the request and
  // resolves with its result; done(result) runs after a success.
  constructor({ form, keyEl, problemEl, submitButton, submit, done, describeProblem }) {
    Object.assign(this, { form, keyEl, problemEl, submitButton, submit, done });
    this.describeProblem = describeProblem || problemNodes;
    this.inFlight = false;
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.send();
    });
  }

  // A new attempt: a new key, shown at once.
  open() {
    this.key = crypto.randomUUID();
    this.keyEl.textContent = this.key;
    this.showProblem(null);
  }

  showProblem(nodes, info = false) {
    this.problemEl.replaceChildren(...(nodes || []));
    this.problemEl.classList.toggle('info', info);
    this.problemEl.hidden = !nodes;
  }

  async send() {
    if (this.inFlight) return; // the second click of a double click
    this.inFlight = true;
    this.submitButton.disabled = true;
    this.form.setAttribute('aria-busy', 'true');
    this.showProblem(null);
    try {
      const result = await this.submit(this.key);
      this.done(result);
    } catch (err) {
      if (err instanceof InputError) {
        this.showProblem([err.message]);
        return;
      }
      if (!(err instanceof ApiError) && !(err instanceof NetworkError)) throw err;
      this.showProblem(this.describeProblem(err));
      if (settlesAttempt(err)) {
        this.key = crypto.randomUUID();
        this.keyEl.textContent = this.key;
      }
    } finally {
      this.inFlight = false;
      this.submitButton.disabled = false;
      this.form.removeAttribute('aria-busy');
    }
  }
}
