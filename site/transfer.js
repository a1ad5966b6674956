// Handing a place to someone else (issue 41), both sides:
//   handOver(box, call, signal)  on "my registration" (mine.js, when the organiser allows it now):
//                                the fee and cut-off, the new runner's address, the pending
//                                offer (its address partly hidden) and withdrawing it
//   #/transfer/{token}           the link emailed to the new runner: kept for this tab, then the
//   #/transfer                   address is replaced by #/transfer (tokens hold no "/"); the
//                                offer, their details, the event's questions and waiver
//                                (questions.js), the fee's card step (pay.js), their registration
// Its own module: "my registration" and the hold page are near the page budget, and most
// runners never hand a place over.
import { api, withBusyRetry } from './api.js';
import { backLink, day, enc, errorBox, go, h, money, page, retitle, say, setText, store, when } from './ui.js';
import { normaliseDate, validate } from './validate.js';

const KEY = 'transfer';
const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]{2,}$/;

// What each refusal means for the runner reading it (the API's message says the particulars).
const WHY = {
  OFFER_GONE: 'Ask the runner who offered it for a new link.',
  TRANSFER_NOT_ALLOWED: 'The organiser’s rules do not allow handing this place over now.',
  INVALID_TOKEN: 'This link is not valid: open the newest link from your email, or ask the runner to send it again.',
  TOKEN_EXPIRED: 'This link has expired: ask the runner to send it again.',
  EMAIL_ALREADY_REGISTERED: 'An address has one registration per race, so this place cannot be yours as well.',
  PAYMENT_DECLINED: 'Nothing was charged: try another card.',
};
const explain = (e) => [e.message, WHY[e.code]].filter(Boolean).join(' ');

// -- the runner who has the place ---------------------------------------------------------------
export async function handOver(box, call, signal) {
  const title = box.firstChild;
  const st = h('p', { role: 'status', testid: 'transfer-status' });

  async function load(message) {
    let q;
    try {
      q = (await call('GET', '/transfer')).data;
    } catch (e) {
      if (signal.aborted) return;
      return box.replaceChildren(title, errorBox(e.message, () => load()));
    }
    box.replaceChildren(title, ...render(q), st);
    setText(st, message || '');
  }

  function render(q) {
    // The cut-off here; the fee and what happens are the API's note (said once, not twice).
    const terms = h('p', { testid: 'transfer-terms', 'data-fee': String(q.feeCents) },
      q.until ? `You can hand your place over until ${day(q.until)}. ` : '',
      q.refundable ? '' : 'A place taken over cannot be cancelled with a refund.');
    const note = h('p', { testid: 'transfer-note' }, q.note);
    if (!q.allowed) return [note];
    const pending = q.pendingTo ? pendingBox(q) : '';
    return [terms, note, pending, offerForm(q)];
  }

  function pendingBox(q) {
    const withdraw = h('button', { type: 'button', testid: 'transfer-withdraw' }, 'Withdraw the offer');
    withdraw.addEventListener('click', async () => {
      withdraw.disabled = true;
      try {
        await call('DELETE', '/transfer');
        say('Offer withdrawn: its link no longer works.');
        await load('Offer withdrawn: its link no longer works. The place is still yours.');
        box.querySelector('input').focus();
      } catch (e) {
        if (signal.aborted) return;
        setText(st, e.message);
        withdraw.disabled = false;
      }
    });
    return h('div', { cls: 'alert info', testid: 'transfer-pending' },
      h('p', {}, 'Offered to ', h('strong', { testid: 'transfer-pending-to' }, q.pendingTo),
        q.pendingSince ? ` on ${when(q.pendingSince)}` : '', '. Until they accept, the place is yours.'),
      withdraw);
  }

  function offerForm(q) {
    const err = h('p', { cls: 'field-error', id: 'transfer-email-err', testid: 'transfer-email-error' });
    const input = h('input', { id: 'transfer-email', type: 'email', autocomplete: 'off', spellcheck: 'false',
      required: true, 'aria-describedby': 'transfer-email-err', testid: 'transfer-email' });
    const send = h('button', { type: 'submit', testid: 'transfer-send' },
      q.pendingTo ? 'Send a new link instead' : 'Send them the link');
    const form = h('form', { novalidate: true, testid: 'transfer-form' },
      h('label', { for: 'transfer-email' }, 'The new runner’s email address'), input, err, send);
    const bad = (msg) => {
      setText(err, msg);
      input.setAttribute('aria-invalid', 'true');
      input.focus();
    };
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      setText(err, '');
      input.removeAttribute('aria-invalid');
      const email = input.value.trim();
      if (!EMAIL.test(email)) return bad('Enter an email address like name@example.com.');
      send.disabled = true;
      try {
        const { data } = await call('POST', '/transfer', { email });
        say(data.message);
        await load(data.message);
      } catch (e) {
        if (signal.aborted) return;
        send.disabled = false;
        const field = e.body && e.body.fields && e.body.fields.email;
        // CONFLICT: their own address (the registration's); the field is where it goes wrong.
        if (field || e.code === 'CONFLICT' || e.code === 'VALIDATION_ERROR') return bad(field || e.message);
        setText(st, e.busy ? `${e.message} Wait a minute before sending another link.` : explain(e));
      }
    });
    return form;
  }

  await load();
}

// -- the runner a place is offered to ----------------------------------------------------------
export function transferPage(token) {
  if (token) {
    store.set(KEY, token);
    return go('/transfer', true);
  }
  const { h1, body, signal } = page('A place offered to you');
  const kept = store.get(KEY);
  const done = store.get(`${KEY}:done`);
  if (done && done.token === kept) return success(h1, body, done.answer);
  if (!kept) {
    body.append(h('p', { testid: 'transfer-no-link' }, 'Open the link in the email offering you the place.'), backLink());
    return;
  }
  const st = h('p', { role: 'status', testid: 'transfer-progress' }, 'Loading the offer…');
  body.append(st);
  (async () => {
    let view;
    try {
      view = (await withBusyRetry(() => api('POST', '/transfers/offer', { body: { token: kept }, signal }), { signal })).data;
    } catch (e) {
      if (signal.aborted) return;
      retitle(h1, 'This offer cannot be taken');
      return body.replaceChildren(h('div', { cls: 'alert', role: 'alert', testid: 'transfer-error', 'data-code': e.code },
        h('p', {}, explain(e))), backLink());
    }
    retitle(h1, `${view.raceName}: ${view.eventName}`);
    body.replaceChildren(...offerView(view), acceptForm(view, kept, h1, body, signal));
  })();
}

function offerView(v) {
  const rows = [
    ['Offered by', v.fromFirstName, 'offer-from'],
    ['Race', v.raceName, 'offer-race'],
    ['Event', v.eventName, 'offer-event'],
    ['Race day', day(v.raceDate), 'offer-race-day'],
    ['Your email', v.email, 'offer-email'],
    ['Transfer fee', v.feeCents ? money(v.feeCents, v.currency) : 'None', 'offer-fee'],
    ['Accept by', day(v.until), 'offer-until'],
  ];
  return [
    h('p', { role: 'status', testid: 'offer-summary' },
      `${v.fromFirstName} offers you their place. Take it over with your details below.`),
    h('dl', { testid: 'offer-details' }, rows.flatMap(([dt, dd, testid]) => [h('dt', {}, dt), h('dd', { testid }, dd)])),
    h('p', { cls: 'muted', testid: 'offer-note' }, v.note,
      v.refundable ? '' : ' A place taken over cannot be cancelled with a refund.'),
  ];
}

function acceptForm(view, token, h1, body, signal) {
  const state = store.get(`${KEY}:form`) || {};
  const save = () => store.set(`${KEY}:form`, state);
  const fields = {};
  const setErr = (name, msg) => {
    const f = fields[name];
    if (!f) return;
    setText(f.err, msg || '');
    f.err.hidden = !msg;
    if (msg) f.input.setAttribute('aria-invalid', 'true');
    else f.input.removeAttribute('aria-invalid');
  };
  const field = (name, label, attrs, hint) => {
    const id = `t-${name}`;
    const err = h('p', { id: `${id}-err`, cls: 'field-error', testid: `error-${name}`, hidden: true });
    const input = h('input', { id, name, testid: `field-${name}`,
      'aria-describedby': `${hint ? `${id}-hint ` : ''}${id}-err`, ...attrs });
    input.value = state[name] || '';
    input.addEventListener('input', () => {
      state[name] = input.value;
      save();
    });
    if (name === 'dateOfBirth') {
      input.addEventListener('change', () => {
        state[name] = input.value = normaliseDate(input.value);
        save();
      });
    }
    fields[name] = { input, err };
    return h('div', { cls: 'field' }, h('label', { for: id }, label),
      hint && h('p', { id: `${id}-hint`, cls: 'hint' }, hint), err, input);
  };
  const fee = view.feeCents;
  const send = h('button', { type: 'submit', cls: 'primary', testid: 'transfer-accept' },
    fee ? 'Continue to payment' : 'Take over this place');
  const details = h('fieldset', { testid: 'transfer-details' }, h('legend', {}, 'About you, the new runner'),
    field('firstName', 'First name', { autocomplete: 'given-name', maxlength: '100', required: true }),
    field('lastName', 'Last name', { autocomplete: 'family-name', maxlength: '100', required: true }),
    field('dateOfBirth', 'Date of birth', { autocomplete: 'bday', inputmode: 'numeric', placeholder: 'YYYY-MM-DD',
      required: true }, 'Year-month-day, for example 1990-04-23.'),
    send);
  const cardHost = h('div', { cls: 'card-form', testid: 'card-form' });
  const cardErr = h('p', { cls: 'field-error', role: 'alert', testid: 'error-card', hidden: true });
  const payBtn = h('button', { type: 'submit', cls: 'primary', testid: 'transfer-pay' },
    `Pay ${money(fee, view.currency)} and take the place`);
  const payment = h('fieldset', { testid: 'transfer-payment', hidden: true }, h('legend', {}, 'Transfer fee'),
    h('p', {}, `The organiser’s transfer fee: ${money(fee, view.currency)}, paid by card.`), cardErr, cardHost,
    h('div', { cls: 'row' }, payBtn,
      h('button', { type: 'button', testid: 'transfer-edit', onclick: () => step(1, 'firstName') }, 'Edit my details')));
  const status = h('p', { role: 'status', testid: 'transfer-form-status' });
  const problem = h('div', { testid: 'transfer-problem' });
  const form = h('form', { novalidate: true, testid: 'transfer-accept-form' }, details, payment, status, problem);
  let questions = null;
  let card = null;
  let busy = false;

  const setCardErr = (msg) => {
    setText(cardErr, msg || '');
    cardErr.hidden = !msg;
  };
  function step(n, focusName) {
    details.hidden = n !== 1;
    payment.hidden = n !== 2;
    if (focusName) fields[focusName].input.focus();
  }
  const lock = (on) => {
    busy = on;
    for (const b of form.querySelectorAll('button')) b.disabled = on;
    form.setAttribute('aria-busy', String(on));
  };

  function check() {
    state.dateOfBirth = fields.dateOfBirth.input.value = normaliseDate(fields.dateOfBirth.input.value);
    const errs = validate(state, ['firstName', 'lastName', 'dateOfBirth']);
    for (const n of ['firstName', 'lastName', 'dateOfBirth']) setErr(n, errs[n]);
    if (questions) Object.assign(errs, questions.check());
    return errs;
  }
  const bodyOf = () => ({
    token,
    firstName: String(state.firstName || '').trim(),
    lastName: String(state.lastName || '').trim(),
    dateOfBirth: normaliseDate(state.dateOfBirth),
    ...(questions ? questions.body() : {}),
  });

  // A refusal, said where it can be fixed: a field's beside it, a card's on the card step.
  function fail(e) {
    const named = (/^(VALIDATION_ERROR|OPTION_SOLD_OUT)$/.test(e.code) && e.body && e.body.fields) || {};
    const here = Object.keys(named).filter((n) => fields[n]);
    if (here.length) {
      for (const n of here) setErr(n, String(named[n]));
      step(1);
      fields[here[0]].input.focus();
      setText(status, 'Please fix the fields marked above.');
      return;
    }
    if (e.code === 'PAYMENT_DECLINED') {
      setCardErr(explain(e));
      return say(cardErr.textContent);
    }
    const box = h('div', { cls: 'alert', role: 'alert', tabindex: '-1', testid: 'transfer-error', 'data-code': e.code },
      h('p', {}, explain(e)));
    problem.replaceChildren(box);
    box.focus();
  }

  async function accept() {
    lock(true);
    problem.replaceChildren();
    setText(status, 'Sending your details…');
    try {
      const { data } = await withBusyRetry(() => api('POST', '/transfers/accept', { body: bodyOf(), signal }),
        { signal, onWait: (s) => setText(status, `Busy: trying again in ${Math.ceil(s)} s. Your details are kept.`) });
      setText(status, '');
      lock(false);
      if (data.status === 'TRANSFERRED') return finish(data);
      return showCard(data);
    } catch (e) {
      if (signal.aborted) return;
      lock(false);
      setText(status, '');
      fail(e);
    }
  }

  async function showCard(data) {
    step(2);
    setText(status, 'Loading the secure card form…');
    try {
      if (card) card.destroy();
      card = await (await import('./pay.js')).mountCardForm(cardHost, data);
      setText(status, '');
      const frame = cardHost.querySelector('iframe');
      if (frame) frame.focus();
    } catch (e) {
      if (signal.aborted) return;
      setText(status, '');
      problem.replaceChildren(errorBox(e.message, () => accept()));
    }
  }

  // The card in the provider's frame, then the server's word on it (it asks the provider).
  async function payNow() {
    lock(true);
    setCardErr('');
    problem.replaceChildren();
    setText(status, 'Paying…');
    try {
      const { declined, data } = await (await import('./pay.js')).payAndSettle(card,
        () => api('POST', '/transfers/confirm', { body: { token }, signal }),
        { signal, onPaid: () => setText(status, 'Payment received. Moving the place to you…') });
      if (declined) {
        setCardErr(`${declined} Nothing was charged: try another card.`);
        return say(cardErr.textContent);
      }
      if (data.status === 'TRANSFERRED') return finish(data);
      setCardErr('The payment did not go through: try again or use another card.');
      return say(cardErr.textContent);
    } catch (e) {
      if (signal.aborted) return;
      fail(e);
    } finally {
      if (!signal.aborted) {
        lock(false);
        setText(status, '');
      }
    }
  }

  function finish(answer) {
    store.set(`${KEY}:done`, { token, answer });
    store.del(`${KEY}:form`);
    success(h1, body, answer);
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (busy) return;
    if (!payment.hidden && card) return payNow();
    const errs = check();
    const first = Object.keys(errs).find((n) => fields[n]);
    if (first) {
      setText(status, 'Please fix the fields marked above.');
      return fields[first].input.focus();
    }
    accept();
  });

  // The event's questions and waiver as they stand now, asked after the date of birth.
  import('./questions.js')
    .then((m) => m.attach({ raceId: view.raceId, eventId: view.eventId, raceDate: view.raceDate },
      { state, save, fields, signal, setErr }))
    .then((q) => { questions = q; }, () => {});
  import('./pay.js').catch(() => {}); // warm the card step's module
  return form;
}

function success(h1, body, answer) {
  retitle(h1, 'The place is yours');
  const open = h('a', { href: `#/my/${enc(answer.linkToken)}`, testid: 'transfer-open-mine' }, 'See my registration');
  body.replaceChildren(
    h('p', { role: 'status', testid: 'transfer-done' }, answer.message),
    answer.bib != null ? h('p', {}, 'Your bib number: ', h('strong', { testid: 'transfer-bib' }, String(answer.bib))) : '',
    h('p', {}, open));
  say(answer.message);
  open.focus();
}
