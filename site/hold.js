// #/holds/{holdId}: the runner's details, then payment, while the hold's clock runs.
// Everything typed is kept in sessionStorage under the hold id, so a failed request,
// a reload or a declined card never loses it.
import { api, now, withBusyRetry } from './api.js';
import {
  BUSY, DETAILS, backLink, duration, enc, errorBox, every, go, h, money, page, retitle, say, setText,
  statusLines, store, toMs,
} from './ui.js';
import { holdGone, toWaitingScreen } from './holdend.js';
import { normaliseDate, registrationBody, validate } from './validate.js';

const LOCAL = ['localhost', '127.0.0.1', '[::1]'].includes(location.hostname);
// Stripe's documented test cards (the local stack's provider is a stand-in that knows them).
const TEST_CARDS = [
  ['4242 4242 4242 4242', 'succeeds'],
  ['4000 0000 0000 0002', 'is declined'],
  ['4000 0025 0000 3155', 'asks for 3-D Secure'],
];

// The event's age rule as the API stated it (kept with the hold's context), or null.
const ageRule = (c) => (c.ageRule ? {
  eventName: c.eventName, minAge: c.minAge, maxAge: c.maxAge, ageRule: c.ageRule, raceDate: c.raceDate,
} : null);

export function holdPage(holdId) {
  const ctx = store.get(`hold:${holdId}`);
  if (!ctx) return import('./holdlink.js').then((m) => m.openLink(holdId, holdPage)); // opened elsewhere
  if (ctx.registrationId) return go(`/registrations/${enc(ctx.registrationId)}`, true);
  if (ctx.places > 1) return import('./team.js').then((m) => m.teamPage(holdId, ctx)); // a team's
  const { h1, body, signal } = page(ctx.eventName ? `Register: ${ctx.eventName}` : 'Register');
  // A new hold after an expired one starts from the details typed last time ("carry").
  const state = store.get(`form:${holdId}`) || { ...store.get('carry'), step: 1 };
  const save = () => store.set(`form:${holdId}`, state);
  const fields = {};
  // The discount code's field, loaded when a runner says they have one (most do not: the
  // page's weight stays the same for them), or at once for a hold that already carries one.
  const codeEl = h('div', {}, !ctx.code && h('button', {
    type: 'button', cls: 'link', testid: 'have-code', onclick: () => addCode(1),
  }, 'Discount code?'));
  const addCode = (f) => import('./code.js').then((m) => m.codeBox(codeEl, holdId, ctx, showPrice, signal, f));
  if (ctx.code) addCode();

  const setErr = (name, msg) => {
    const f = fields[name];
    if (!f) return;
    f.err.textContent = msg || '';
    f.err.hidden = !msg;
    if (msg) f.input.setAttribute('aria-invalid', 'true');
    else f.input.removeAttribute('aria-invalid');
  };
  const check = (names) => {
    const errs = validate(state, names, undefined, ageRule(ctx));
    for (const n of names) setErr(n, errs[n]);
    if (questions && names === DETAILS) Object.assign(errs, questions.check()); // the event's own, by their rules
    return errs;
  };
  // The event's questions (questions.js, loaded only for an event that asks any).
  let questions = null;
  const bodyOf = () => ({ ...registrationBody(state), ...(questions ? questions.body() : {}) });
  const field = (name, label, attrs, hint) => {
    const id = `f-${name}`;
    const err = h('p', { id: `${id}-err`, cls: 'field-error', testid: `error-${name}`, hidden: true });
    const input = h('input', {
      id, name, testid: `field-${name}`, 'aria-describedby': `${hint ? `${id}-hint ` : ''}${id}-err`, ...attrs,
    });
    input.value = state[name] || '';
    input.addEventListener('input', () => {
      state[name] = input.value;
      delete state.pending; // edited, so the next submit is a new body
      save();
      if (!err.hidden) check([name]);
    });
    // Errors appear on Continue/submit, then update as the runner types. Not on blur: a
    // message appearing under a field as it loses focus moves the button being clicked.
    input.addEventListener('change', () => {
      if (name === 'dateOfBirth') state[name] = input.value = normaliseDate(input.value);
      save();
    });
    fields[name] = { input, err };
    return h('div', { cls: 'field' }, h('label', { for: id }, label),
      hint && h('p', { id: `${id}-hint`, cls: 'hint' }, hint), err, input);
  };

  const summary = h('div', { cls: 'alert', role: 'alert', tabindex: '-1', testid: 'error-summary', hidden: true });
  const showSummary = (errs) => {
    const names = Object.keys(errs).filter((n) => fields[n]);
    summary.hidden = !names.length;
    summary.replaceChildren(h('p', {}, h('strong', {}, 'Please fix:')), h('ul', {}, names.map((n) =>
      h('li', {}, h('a', { href: `#f-${n}`, onclick: (e) => (e.preventDefault(), fields[n].input.focus()) }, errs[n])))));
    if (names.length) summary.focus();
  };

  // A free entry has no card step: its details register it (the answer is QUEUED: finish()).
  const cont = h('button', { type: 'submit', cls: 'primary', testid: 'continue-button' },
    ctx.priceCents === 0 ? 'Register' : 'Continue to payment');
  const details = h('fieldset', { testid: 'details-step' }, h('legend', {}, 'About the runner'),
    field('email', 'Email address', { type: 'email', autocomplete: 'email', spellcheck: 'false', required: true },
      'We send the confirmation here.'),
    field('firstName', 'First name', { autocomplete: 'given-name', maxlength: '100', required: true }),
    field('lastName', 'Last name', { autocomplete: 'family-name', maxlength: '100', required: true }),
    field('dateOfBirth', 'Date of birth', {
      autocomplete: 'bday', inputmode: 'numeric', placeholder: 'YYYY-MM-DD', required: true,
    }, `Year-month-day, for example 1990-04-23.${ctx.ageRule ? ` ${ctx.eventName} is for ${ctx.ageRule}.` : ''}`),
    codeEl, cont);

  const who = h('p', { testid: 'runner-summary' });
  const holdSummary = h('p', { testid: 'hold-summary' });
  const showPrice = () => setText(holdSummary, [ctx.eventName, ctx.raceName,
    ctx.priceCents != null && money(ctx.priceCents, ctx.currency)].filter(Boolean).join(' · '));
  showPrice();
  // The provider's card form goes here (its own frame, its own origin).
  const cardHost = h('div', { cls: 'card-form', testid: 'card-form' });
  const cardErr = h('p', { cls: 'field-error', role: 'alert', testid: 'error-card', hidden: true });
  const setCardErr = (msg) => {
    cardErr.textContent = msg || '';
    cardErr.hidden = !msg;
  };
  const payment = h('fieldset', { testid: 'payment-step' }, h('legend', {}, 'Payment'), who,
    LOCAL && h('div', { cls: 'alert info', testid: 'test-cards' },
      h('p', {}, 'Local test stack, no real payments. Use a test card (any future expiry, any CVC):'),
      h('ul', {}, TEST_CARDS.map(([n, d]) => h('li', {}, h('code', {}, n), ` ${d}`)))),
    cardErr, cardHost,
    h('div', { cls: 'row' },
      h('button', { type: 'submit', cls: 'primary', testid: 'submit-registration' }, 'Pay and register'),
      h('button', { type: 'button', testid: 'edit-details', onclick: () => step(1, 'email') }, 'Edit details')));
  const status = statusLines('form-status');
  const problem = h('div', { testid: 'form-error' });
  const form = h('form', { novalidate: true, testid: 'registration-form' },
    summary, details, payment, status.el, problem);

  function step(n, focusName) {
    state.step = n;
    save();
    details.hidden = n !== 1;
    payment.hidden = n !== 2;
    // The code goes with the step shown: on the card step it changes the payment's amount.
    if (n === 2) payment.insertBefore(codeEl, cardErr);
    else details.insertBefore(codeEl, cont);
    setText(who, state.email ? `Registering ${state.firstName || ''} ${state.lastName || ''} (${state.email}).`
      : 'The runner\'s details were sent from another device.');
    if (focusName) fields[focusName].input.focus();
  }

  // The hold's clock on server time; announced at 2 min, 1 min and expiry.
  const exp = toMs(ctx.expiresAt);
  const timer = h('p', { cls: 'timer', testid: 'hold-countdown' });
  const bar = h('progress', { max: '1', value: '1', 'aria-hidden': 'true', hidden: !(exp && ctx.heldAt) });
  let warned = Infinity;
  let ended = false; // the server said the hold is gone, whatever the clock says
  const tick = () => {
    if (ended) {
      setText(timer, 'Your hold has expired.');
      timer.classList.add('warn');
      bar.value = 0;
      return;
    }
    if (Number.isNaN(exp)) return setText(timer, 'Your place is held for a limited time.');
    const left = exp - now();
    setText(timer, left > 0 ? `Your place is held for ${duration(left)}.` : 'Your hold has expired.');
    timer.classList.toggle('warn', left < 120000);
    if (ctx.heldAt) bar.value = Math.max(0, left / (exp - ctx.heldAt));
    for (const mark of [120000, 60000, 0]) {
      if (left > mark || warned <= mark) continue;
      warned = mark;
      say(mark ? `${mark / 60000} minute${mark > 60000 ? 's' : ''} left to finish registering.`
        : 'Your hold has expired. You may need to hold a new place.');
    }
  };
  every(1000, tick, signal);

  const release = h('button', { type: 'button', cls: 'link', testid: 'release-hold' }, 'Release my place');
  const releaseStatus = statusLines('release-status');
  release.addEventListener('click', async () => {
    release.disabled = true;
    releaseStatus.set('Releasing your place…');
    try {
      await withBusyRetry(() => api('DELETE', `/holds/${enc(holdId)}`, { signal }), { signal });
    } catch (e) {
      if (signal.aborted) return;
      if (e.status !== 404) { // 404: already gone, which is what the runner wanted
        releaseStatus.set(`Could not release your place. ${e.message}`, 'err');
        release.disabled = false;
        return;
      }
    }
    store.del(`hold:${holdId}`);
    store.del(`form:${holdId}`);
    retitle(h1, 'Place released');
    body.replaceChildren(h('p', { testid: 'released' }, 'Your place has been released for another runner.'),
      backLink(ctx.raceId));
    say('Your place has been released.');
  });

  const lock = (on) => {
    for (const b of form.querySelectorAll('button')) b.disabled = on;
    release.disabled = on;
    form.setAttribute('aria-busy', on);
  };

  let card = null; // the mounted card form, once the server has answered the details

  // Registered (queued): on to the waiting screen, with the runner's details for it.
  const finish = (id, payload, retryAfter) => toWaitingScreen(holdId, ctx, id, retryAfter, payload);

  async function resume() {
    lock(true);
    status.set('Loading your payment…');
    try {
      const { data, retryAfter } = await withBusyRetry(
        () => api('POST', `/holds/${enc(holdId)}/payment`, { signal }), { signal });
      lock(false);
      status.set('');
      if (data.status === 'QUEUED' || data.status === 'CONFIRMED') return finish(data.registrationId, {}, retryAfter);
      return showCardForm(data);
    } catch (e) {
      if (signal.aborted) return;
      lock(false);
      status.set('');
      fail(e);
    }
  }

  // The details were accepted: the email is ours and the hold has its payment. Show the card form.
  async function showCardForm(data) {
    state.step = 2;
    state.registrationId = data.registrationId;
    save();
    step(2);
    status.set('Loading the secure card form…');
    try {
      if (card) card.destroy();
      card = await (await import('./pay.js')).mountCardForm(cardHost, data);
      status.set('');
      const frame = cardHost.querySelector('iframe');
      if (frame) frame.focus();
    } catch (e) {
      if (signal.aborted) return;
      status.set('');
      problem.replaceChildren(errorBox(e.message, () => submit(state.pending || bodyOf())));
    }
  }

  // The card, then the server's word: it asks the provider, never takes the page's.
  async function payNow() {
    if (!card) return submit(bodyOf());
    lock(true);
    setCardErr('');
    problem.replaceChildren();
    status.set('Paying…');
    try {
      const { declined, data, retryAfter } = await (await import('./pay.js')).payAndConfirm(card, holdId, {
        signal,
        onPaid: () => status.set('Payment received. Registering you…'),
        onWait: (s) => status.wait(s, (left) => `Busy: trying again in ${left} s.`),
      });
      if (declined) {
        const msg = `${declined} Your place is still held: try another card.`;
        setCardErr(msg);
        say(msg);
        return;
      }
      return finish(data.registrationId, registrationBody(state), retryAfter);
    } catch (e) {
      if (signal.aborted) return;
      if (e.code === 'PAYMENT_DECLINED') {
        setCardErr(`${e.message}`);
        say(e.message);
      } else {
        fail(e);
      }
    } finally {
      if (!signal.aborted) {
        lock(false);
        status.set('');
      }
    }
  }

  async function submit(payload) {
    state.pending = payload; // a retry resends exactly this body
    save();
    lock(true);
    problem.replaceChildren();
    status.set('Sending your details…');
    try {
      const { data, retryAfter } = await withBusyRetry(
        () => api('POST', `/holds/${enc(holdId)}/registration`, { body: payload, signal }),
        {
          signal,
          attempts: 10,
          onWait: (s) => {
            status.set(BUSY, 'warn');
            status.wait(s, (left) => `Trying again in ${left} s. Your details are kept.`);
          },
        },
      );
      if (data.status === 'QUEUED' || data.status === 'CONFIRMED') return finish(data.registrationId, payload, retryAfter);
      delete state.pending;
      lock(false);
      status.set('');
      return showCardForm(data);
    } catch (e) {
      if (signal.aborted) return;
      lock(false);
      status.set('');
      fail(e);
    }
  }

  function fail(e) {
    // A refused answer (a bad one, or an option sold out meanwhile) is named like a detail.
    const errs = (/^(VALIDATION_ERROR|OPTION_SOLD_OUT)$/.test(e.code) && e.body && e.body.fields) || {};
    if (Object.keys(errs).length) {
      for (const [n, m] of Object.entries(errs)) setErr(n, String(m));
      delete state.pending;
      step(Object.keys(errs).some((n) => DETAILS.includes(n) || n.includes('.')) ? 1 : 2); // answers.x, waiver.x
      showSummary(errs);
      if (!Object.keys(errs).some((n) => fields[n])) problem.replaceChildren(errorBox(e.message));
    } else if (e.code === 'EMAIL_ALREADY_REGISTERED') {
      delete state.pending;
      step(1);
      setErr('email', e.message);
      fields.email.input.select();
      fields.email.input.focus();
      say(fields.email.err.textContent);
    } else if (e.code === 'HOLD_EXPIRED' || e.status === 404) {
      store.set('carry', Object.fromEntries(DETAILS.map((n) => [n, state[n]])));
      store.del(`hold:${holdId}`);
      lock(true);
      ended = true;
      tick();
      holdGone(problem, ctx.raceId, [
        h('p', {}, e.status === 404 ? 'We could not find this hold. It may have expired or been released.'
          : 'Your hold expired before we received your registration.'),
        h('p', {}, 'Your details are saved for your next attempt.'),
      ], { focus: true }); // the button that was pressed is now disabled
    } else {
      // Network or server trouble. The server keys idempotency on the hold, so
      // resending the identical body can never register or charge twice.
      problem.replaceChildren(errorBox(`${e.message} Your details are saved.`, () => submit(state.pending)));
    }
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (form.getAttribute('aria-busy') === 'true') return;
    if (ctx.elsewhere && card && !state.email) return payNow(); // the details were sent from another device
    const errs = check(DETAILS);
    if (Object.keys(errs).length) {
      step(1);
      return showSummary(errs);
    }
    summary.hidden = true;
    if (state.step === 1 || !card) return submit(state.pending || bodyOf());
    payNow();
  });

  body.append(
    holdSummary,
    h('div', { cls: 'timer-box' }, timer, bar), form, h('p', {}, release), ...releaseStatus.el,
  );
  step(1);
  const start = () => {
    if (ctx.elsewhere && !state.email) {
      resume(); // details sent on another device: the hold's intent, without them
    } else if (state.step === 2 && !state.pending && !Object.keys(check(DETAILS)).length) {
      submit(bodyOf()); // a reload on the card form: the same intent comes back
    } else if (state.pending) {
      problem.replaceChildren(errorBox('Your last attempt did not finish. Your details are saved.',
        () => submit(state.pending)));
    }
  };
  // The questions first (the details step shows them), then whatever the page resumes. If they
  // cannot load, the server still checks the answers and names any it refuses.
  import('./questions.js').then((m) => m.attach(ctx, { state, save, fields, signal, setErr }))
    .then((q) => { questions = q; }, () => {}).then(() => signal.aborted || start());
  // Warm what comes next: the card form's module (loaded on demand, so the page the runner
  // first sees is lighter) and the waiting screen.
  import('./pay.js').catch(() => {});
  import('./wait.js').catch(() => {});
}
