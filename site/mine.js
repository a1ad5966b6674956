// A runner's own entry.
//   #/my/{token}            the link from the email: kept for this tab, then the address is
//                           replaced by #/my so the token does not stay in the history
//   #/my                    my registration (the kept token): details, payments, cancel,
//                           hand my place to someone else (transfer.js, loaded when allowed)
//   #/my/email/{token}      confirm a new email address
//   #/transfer[/{token}]    a place handed to me: take it over (transfer.js)
//   #/races/{raceId}/find   "find my registration": the link is emailed to a registered address
import { api } from './api.js';
import { backLink, day, enc, errorBox, go, h, money, page, retitle, say, setText, store } from './ui.js';

const HEADER = 'X-Racecap-Registration';
const KEY = 'mine';

// app.js sends #/my… and #/transfer… here as (kind, rest): one route line for all of them.
export function minePage(kind, rest) {
  const [a, b, more] = rest.split('/');
  if (kind === 'transfer' && b == null) {
    return import('./transfer.js').then((m) => m.transferPage(a), () => page('Could not load this page').body.append(
      errorBox('Part of this page did not download. Check your connection.', () => location.reload())));
  }
  if (!rest) return myPage();
  if (a === 'email' && b && more == null) return confirmEmailPage(b);
  if (b == null) return linkPage(a);
  page('Page not found').body.append(h('p', { testid: 'not-found' }, 'There is nothing at this address.'), backLink());
}

// The emailed link: keep its token for this tab, and take it out of the address bar and history.
export function linkPage(token) {
  store.set(KEY, token);
  go('/my', true);
}

export function myPage() {
  const { h1, body, signal } = page('My registration');
  const kept = store.get(KEY);
  if (!kept) {
    body.append(h('p', { testid: 'my-no-link' }, 'Open the link in your confirmation email to see your registration, ',
      'or ask for a new one on the race’s page.'), backLink());
    return;
  }
  const call = (method, path, body) => api(method, `/my/registration${path}`, { body, signal, headers: { [HEADER]: kept } });

  async function show() {
    let reg;
    try {
      reg = (await call('GET', '')).data;
    } catch (e) {
      if (signal.aborted) return;
      retitle(h1, 'My registration');
      const lost = e.status === 401;
      body.replaceChildren(errorBox(lost ? `${e.message} You can ask for a new link on the race’s page.` : e.message,
        !lost && show), backLink());
      return;
    }
    retitle(h1, `${reg.raceName}: ${reg.eventName}`);
    const rows = [
      ['Runner', `${reg.firstName} ${reg.lastName}`, 'my-runner'],
      ['Bib', String(reg.bib), 'my-bib'],
      ['Race day', day(reg.raceDate), 'my-race-day'],
      ['Email', reg.email, 'my-email'],
      reg.teamName && ['Team', reg.teamName, 'my-team'],
      ['Paid', reg.paidCents ? money(reg.paidCents, reg.currency) : 'Nothing (a free entry)', 'my-paid'],
      reg.refundedCents && ['Refunded', money(reg.refundedCents, reg.currency)
        + (reg.pendingRefundCents ? ` (${money(reg.pendingRefundCents, reg.currency)} on its way)` : ''), 'my-refunded'],
      ['Waiver', reg.waiverAccepted ? 'Accepted' : 'None for this event', 'my-waiver'],
      ...(reg.answers || []).map((a) => [a.label, a.text, 'my-answer']),
    ].filter(Boolean);
    body.replaceChildren(
      h('p', { role: 'status', testid: 'my-status', 'data-status': reg.status }, reg.statusText),
      h('dl', { testid: 'my-details' }, rows.flatMap(([dt, dd, testid]) => [h('dt', {}, dt), h('dd', { testid }, dd)])),
      editSection(reg),
      emailSection(reg),
      transferSection(reg),
      moveSection(reg, 'switch', 'Switch to another event', 'switchOver'),
      moveSection(reg, 'defer', 'Defer my place to next year', 'deferPlace'),
      cancelSection(reg),
      backLink(reg.raceId));
  }

  function editSection(reg) {
    const action = (reg.actions || []).find((a) => a.action === 'edit');
    if (!action) return '';
    const fields = [['firstName', 'First name', 'text', 'given-name'], ['lastName', 'Last name', 'text', 'family-name'],
      ['dateOfBirth', 'Date of birth (YYYY-MM-DD)', 'text', 'bday']];
    const inputs = {}; // by the API's field names, so a 400's `fields` lands under each (answers.<id> too)
    const rows = fields.map(([name, label, type, ac]) => {
      const err = h('p', { cls: 'field-error', id: `edit-${name}-err`, testid: `edit-${name}-error` });
      inputs[name] = { err, input: h('input', { id: `edit-${name}`, name, type, autocomplete: ac, value: reg[name],
        'aria-describedby': `edit-${name}-err`, testid: `edit-${name}` }) };
      return h('div', { cls: 'field' }, h('label', { for: `edit-${name}` }, label), inputs[name].input, err);
    });
    const st = h('p', { role: 'status', testid: 'edit-status' });
    const save = h('button', { type: 'submit', testid: 'edit-save' }, 'Save my details');
    // The event's questions as the registration form asks them (questions.js), filled in with
    // this runner's answers; the waiver is not asked again. Loaded only for an event that asks any.
    const qhost = h('div', { testid: 'edit-questions' });
    const state = { answers: structuredClone(reg.answerValues || {}), dateOfBirth: reg.dateOfBirth };
    const setErr = (name, msg) => inputs[name] && setText(inputs[name].err, msg || '');
    let questions = null;
    const form = h('form', { novalidate: true, testid: 'edit-form' }, rows, qhost, save, st);
    if (Object.keys(reg.answerValues || {}).length) {
      import('./questions.js').then(async (m) => {
        const { data } = await api('GET', `/races/${enc(reg.raceId)}/events/${enc(reg.eventId)}/questions`, { signal });
        // The runner's own choices stay offered even when no other unit of them is left.
        const soldOut = Object.fromEntries(Object.entries(data.soldOut || {}).map(([q, ids]) =>
          [q, ids.filter((id) => ![].concat(reg.answerValues[q] ?? []).includes(id))]));
        if (data.questions.length) {
          questions = m.mountQuestions(qhost, { ...data, soldOut, waiver: null },
            { state, save: () => {}, fields: inputs, raceDate: reg.raceDate, setErr });
        }
      }).catch((e) => signal.aborted || qhost.replaceChildren(
        h('p', { cls: 'muted' }, `Your answers cannot be changed here just now (${e.message}).`)));
    }
    const same = (a, b) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const change = {};
      for (const [name, { input, err }] of Object.entries(inputs)) {
        setText(err, '');
        input.removeAttribute('aria-invalid');
        if (!name.startsWith('answers.') && input.value.trim() !== reg[name]) change[name] = input.value.trim();
      }
      if (questions) {
        const errs = questions.check();
        const first = Object.keys(errs)[0];
        if (first) {
          for (const k of Object.keys(errs)) inputs[k] && inputs[k].input.setAttribute('aria-invalid', 'true');
          return inputs[first] ? inputs[first].input.focus() : setText(st, errs[first]);
        }
        const { answers } = questions.body();
        if (!same(answers, reg.answerValues || {})) change.answers = answers;
      }
      if (!Object.keys(change).length) return setText(st, 'Nothing to save: nothing changed.');
      save.disabled = true;
      try {
        await call('PATCH', '', change);
        say('Your details are saved.');
        await show();
        const saved = document.querySelector('[data-testid="edit-status"]');
        if (saved) saved.textContent = 'Your details are saved.';
      } catch (e) {
        const bad = Object.entries((e.body && e.body.fields) || {}).filter(([k]) => inputs[k]);
        for (const [k, msg] of bad) (setText(inputs[k].err, msg), inputs[k].input.setAttribute('aria-invalid', 'true'));
        if (bad.length) inputs[bad[0][0]].input.focus();
        else setText(st, e.message);
        save.disabled = false;
      }
    });
    return h('section', { 'aria-labelledby': 'edit-title', testid: 'my-edit' },
      h('h2', { id: 'edit-title' }, 'Correct my details'),
      h('p', { cls: 'muted' }, `You can correct your details and answers until ${day(action.until)}.`),
      form);
  }

  function emailSection(reg) {
    if (reg.status !== 'CONFIRMED') return '';
    const err = h('p', { cls: 'field-error', id: 'new-email-err', testid: 'new-email-error' });
    const input = h('input', { id: 'new-email', type: 'email', autocomplete: 'email', required: true,
      'aria-describedby': 'new-email-err', testid: 'new-email' });
    const st = h('p', { role: 'status', testid: 'new-email-status' });
    const send = h('button', { type: 'submit', testid: 'new-email-send' }, 'Send a confirmation link');
    const form = h('form', { novalidate: true, testid: 'new-email-form' },
      h('label', { for: 'new-email' }, 'New email address'), input, err, send);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      setText(err, '');
      input.removeAttribute('aria-invalid');
      send.disabled = true;
      try {
        const { data } = await call('POST', '/email', { email: input.value.trim() });
        setText(st, data.message);
      } catch (e) {
        const field = e.body && e.body.fields && e.body.fields.email;
        setText(err, field || e.message);
        input.setAttribute('aria-invalid', 'true');
        input.focus();
      }
      send.disabled = false;
    });
    return h('section', { 'aria-labelledby': 'email-title', testid: 'my-email-change' },
      h('h2', { id: 'email-title' }, 'Change my email address'),
      h('p', { cls: 'muted' }, 'We send a link to the new address; your registration moves to it once you open it.'),
      form, st);
  }

  // Handing the place over: its code (transfer.js) loads only when the organiser allows it now.
  function transferSection(reg) {
    if (!(reg.actions || []).some((a) => a.action === 'transfer')) return '';
    const box = h('section', { 'aria-labelledby': 'transfer-title', testid: 'my-transfer' },
      h('h2', { id: 'transfer-title' }, 'Hand my place to someone else'));
    import('./transfer.js').then((m) => m.handOver(box, call, signal))
      .catch((e) => signal.aborted || box.append(errorBox(e.message)));
    return box;
  }

  // Switching event, deferring: their code (switch.js) loads only when the organiser allows it now.
  function moveSection(reg, action, title, fn) {
    if (!(reg.actions || []).some((a) => a.action === action)) return '';
    const box = h('section', { 'aria-labelledby': `${action}-title`, testid: `my-${action}` },
      h('h2', { id: `${action}-title` }, title));
    const reload = async (message) => {
      say(message);
      await show();
      body.prepend(h('p', { cls: 'alert info', testid: 'my-moved' }, message)); // what the move did, kept in view
    };
    import('./switch.js').then((m) => m[fn](box, call, signal, ...(action === 'switch' ? [reg, reload] : [reload])))
      .catch((e) => signal.aborted || box.append(errorBox(e.message)));
    return box;
  }

  function cancelSection(reg) {
    const action = (reg.actions || []).find((a) => a.action === 'cancel');
    if (!action) {
      return reg.status === 'CONFIRMED'
        ? h('p', { cls: 'muted', testid: 'my-cancel-unavailable' }, 'To cancel, contact the race’s organiser.')
        : '';
    }
    const box = h('section', { 'aria-labelledby': 'cancel-title', testid: 'my-cancel' },
      h('h2', { id: 'cancel-title' }, 'Cancel my registration'),
      h('p', {}, `You can cancel until ${day(action.until)} (${reg.timeZone}). ${action.text}`));
    const start = h('button', { type: 'button', testid: 'cancel-start', onclick: () => ask() }, 'Cancel my registration…');
    box.append(start);

    async function ask(message) {
      start.disabled = true;
      let quote;
      try {
        quote = (await call('GET', '/cancellation')).data;
      } catch (e) {
        start.disabled = false;
        return box.append(errorBox(e.message));
      }
      const line = h('p', { role: 'alert', testid: 'cancel-quote', 'data-amount': String(quote.amountCents) },
        message ? `${message} ` : '', quote.note);
      const yes = h('button', { type: 'button', cls: 'danger', testid: 'cancel-confirm' },
        quote.amountCents ? `Cancel and refund ${money(quote.amountCents, quote.currency)}` : 'Cancel with no refund');
      const no = h('button', { type: 'button', cls: 'link', testid: 'cancel-keep' }, 'Keep my registration');
      const confirm = h('div', { cls: 'confirm', testid: 'cancel-confirmation' }, line, yes, ' ', no);
      box.replaceChildren(box.firstChild, confirm);
      yes.focus();
      no.addEventListener('click', () => show());
      yes.addEventListener('click', async () => {
        yes.disabled = true;
        no.disabled = true;
        const st = h('p', { role: 'status', testid: 'cancel-progress' }, 'Cancelling…');
        confirm.append(st);
        try {
          const { data } = await call('POST', '/cancellation', { amountCents: quote.amountCents });
          say(data.message);
          await show();
          const done = document.querySelector('[data-testid="my-status"]');
          if (done) done.after(h('div', { cls: 'alert info', role: 'status', testid: 'cancel-done' }, data.message));
        } catch (e) {
          if (e.code === 'QUOTE_CHANGED') return ask('The amount changed since you looked.');
          setText(st, e.busy
            ? 'The payment provider is busy: your cancellation is under way and finishes by itself. We will email you.'
            : e.message);
          if (e.busy) setTimeout(show, 4000);
          else (yes.disabled = false, no.disabled = false);
        }
      });
    }
    return box;
  }

  show();
}

export function confirmEmailPage(token) {
  const { h1, body, signal } = page('Confirming your new address');
  const st = h('p', { role: 'status', testid: 'email-confirm-status' }, 'Confirming…');
  body.append(st);
  (async () => {
    try {
      const { data } = await api('POST', '/my/registration/email/confirm', { body: { token }, signal });
      store.set(KEY, data.linkToken);
      retitle(h1, 'Address changed');
      setText(st, data.message);
      body.append(h('p', {}, h('a', { href: '#/my', testid: 'email-confirm-open' }, 'See my registration')));
      say(data.message);
    } catch (e) {
      if (signal.aborted) return;
      retitle(h1, 'Address not changed');
      body.replaceChildren(errorBox(e.message), backLink());
    }
  })();
}

export function findPage(raceId) {
  const { body, signal } = page('Find my registration');
  const err = h('p', { cls: 'field-error', id: 'find-email-err', testid: 'find-email-error' });
  const input = h('input', { id: 'find-email', type: 'email', name: 'email', autocomplete: 'email', required: true,
    'aria-describedby': 'find-email-err', testid: 'find-email' });
  const st = h('p', { role: 'status', testid: 'find-status' });
  const send = h('button', { type: 'submit', cls: 'primary', testid: 'find-send' }, 'Email me the link');
  const form = h('form', { novalidate: true, testid: 'find-form' },
    h('label', { for: 'find-email' }, 'The email address you registered with'), input, err, send);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    setText(err, '');
    input.removeAttribute('aria-invalid');
    if (!/^[^@\s]+@[^@\s]+\.[^@\s]{2,}$/.test(input.value.trim())) {
      setText(err, 'Enter an email address like name@example.com.');
      input.setAttribute('aria-invalid', 'true');
      return input.focus();
    }
    send.disabled = true;
    try {
      const { data } = await api('POST', `/races/${enc(raceId)}/registration-link`, { body: { email: input.value.trim() }, signal });
      setText(st, data.message);
    } catch (e) {
      const field = e.body && e.body.fields && e.body.fields.email;
      if (field) (setText(err, field), input.setAttribute('aria-invalid', 'true'), input.focus());
      else setText(st, e.message);
    }
    send.disabled = false;
  });
  body.append(
    h('p', {}, 'We email the link to your registration to the address you registered with. '
      + 'Anyone with the link can change or cancel your registration: keep it to yourself.'),
    form, st, backLink(raceId));
}
