// Moving my entry (issue 41), on "my registration" (mine.js, loaded when the organiser allows it):
//   switchOver(box, call, signal, reg, reload)  another event of the race: what each costs or
//       refunds before confirming, its own questions and waiver (questions.js), the difference's
//       card step (pay.js), then the new bib; a switch begun and not paid can be given up. A
//       team's captain moves the whole team: the prices are the team's, and each member's
//       questions are asked under their name (`members.<i>.…`, as the team's form names them)
//   deferPlace(box, call, signal, reload)       the race's next edition: the credit (paid less
//       the organiser's fee) said before confirming, then the personal code
// Its own module: "my registration" is near the page budget, and most runners never move.
import { api, withBusyRetry } from './api.js';
import { enc, errorBox, h, money, say, setText } from './ui.js';

const WHY = {
  SOLD_OUT: 'Your registration is unchanged.',
  SWITCH_NOT_ALLOWED: 'The organiser’s rules do not allow this switch now.',
  SWITCH_GONE: 'Reload the page to see your registration as it is now.',
  PAYMENT_DECLINED: 'Nothing was charged: try another card.',
  DEFERRAL_NOT_ALLOWED: 'The organiser’s rules do not allow deferring now.',
  QUOTE_CHANGED: 'Check the new amount, then confirm again.',
  NOT_ENOUGH_PLACES: 'Your team’s registrations are unchanged.',
};
const explain = (e) => [e.message, WHY[e.code]].filter(Boolean).join(' ');

export async function switchOver(box, call, signal, reg, reload) {
  const title = box.firstChild;
  const st = h('p', { role: 'status', testid: 'switch-status' });
  let q;
  try {
    q = (await call('GET', '/switch')).data;
  } catch (e) {
    if (!signal.aborted) box.replaceChildren(title, errorBox(e.message, () => switchOver(box, call, signal, reg, reload)));
    return;
  }
  const note = h('p', { testid: 'switch-note' }, q.note);
  if (!q.allowed) return box.replaceChildren(title, note);
  const state = { answers: {}, waiver: {}, dateOfBirth: reg.dateOfBirth };
  const fields = {};
  let questions = null;
  let card = null;
  let answer = null;
  const qhost = h('div', { testid: 'switch-questions' });
  const cardHost = h('div', { cls: 'card-form', testid: 'switch-card' });
  const cardErr = h('p', { cls: 'field-error', role: 'alert', testid: 'switch-card-error', hidden: true });
  const go = h('button', { type: 'submit', cls: 'primary', testid: 'switch-confirm' }, 'Switch to this event');
  const giveUp = h('button', { type: 'button', testid: 'switch-give-up', hidden: !q.pendingEventId },
    'Cancel this switch');
  const choices = q.targets.map((t) => {
    const id = `switch-${t.eventId}`;
    const radio = h('input', { type: 'radio', name: 'switch-event', id, value: t.eventId, testid: `switch-to-${t.eventId}`,
      disabled: !t.available, 'aria-describedby': `${id}-note` });
    radio.addEventListener('change', () => chose(t));
    return h('div', { cls: 'field' }, h('label', { for: id }, radio, ` ${t.eventName} — ${money(t.priceCents, t.currency)}`),
      h('p', { id: `${id}-note`, cls: 'hint', testid: `switch-note-${t.eventId}` }, t.note));
  });
  const form = h('form', { novalidate: true, testid: 'switch-form' },
    h('fieldset', {}, h('legend', {}, 'Switch to'), ...choices), qhost, cardErr, cardHost, go, giveUp, st);
  box.replaceChildren(title, note, form);
  const chosen = () => q.targets.find((t) => t.eventId === form.elements['switch-event']?.value);
  // A switch begun and not paid (a reload, a second tab): its event chosen again, so the runner
  // goes on with it (the place stays held) or cancels it, rather than starting another.
  const pending = q.targets.find((t) => t.eventId === q.pendingEventId);
  if (pending) {
    form.querySelector(`#switch-${CSS.escape(pending.eventId)}`).checked = true;
    chose(pending);
  }

  async function chose(t) {
    questions = null;
    qhost.replaceChildren();
    cardHost.replaceChildren();
    state.answers = {};
    state.waiver = {};
    go.textContent = t.payCents ? `Switch and pay ${money(t.payCents, t.currency)}` : 'Switch to this event';
    const m = await import('./questions.js');
    const setErr = (n, msg) => fields[n] && setText(fields[n].err, msg || '');
    questions = q.team ? await askTeam(t, m, setErr).catch(() => null)
      : await m.attach({ raceId: reg.raceId, eventId: t.eventId, raceDate: reg.raceDate },
        { state, save: () => {}, fields, signal, setErr }, qhost).catch(() => null);
  }

  // The captain answers for every member, each under their name: one questions form per member.
  async function askTeam(t, m, setErr) {
    const { data } = await withBusyRetry(() => api('GET',
      `/races/${enc(reg.raceId)}/events/${enc(t.eventId)}/questions`, { signal }), { signal });
    if (!data.questions.length && !data.waiver) return null;
    const asked = q.team.map((who, i) => {
      const host = h('div', {});
      qhost.append(h('fieldset', { testid: 'switch-member' },
        h('legend', {}, `${who.firstName} ${who.lastName}${i === 0 ? ' (you)' : ''}`), host));
      // Their age on race day stands for their date of birth (not sent to the captain's page):
      // it is all the guardian's rule reads.
      const st = { answers: {}, waiver: {}, dateOfBirth: bornFor(who.ageOnRaceDay, reg.raceDate) };
      return m.mountQuestions(host, data, { state: st, save: () => {}, fields, raceDate: reg.raceDate, setErr,
        prefix: `members.${i}.` });
    });
    return {
      check: () => Object.assign({}, ...asked.map((a) => a.check())),
      body: () => ({ members: asked.map((a) => a.body()) }),
    };
  }

  const lock = (on) => {
    for (const b of form.querySelectorAll('button')) b.disabled = on;
    form.setAttribute('aria-busy', String(on));
  };
  const setCardErr = (msg) => {
    setText(cardErr, msg || '');
    cardErr.hidden = !msg;
  };
  function fail(e) {
    const named = (e.body && e.body.fields) || {};
    const at = Object.keys(named).map((n) => form.querySelector(`[name="${n}"]`)).find(Boolean);
    if (e.code === 'PAYMENT_DECLINED') {
      setCardErr(explain(e));
      return say(cardErr.textContent);
    }
    setText(st, explain(e));
    say(st.textContent);
    if (at) at.focus();
  }
  async function done(data) {
    const refund = data.refundCents ? ` ${money(data.refundCents, data.currency)} is refunded to the card that paid.` : '';
    await reload(`${data.message} Your new bib: ${data.bib}.${refund}`);
  }
  async function confirmPaid() {
    const { declined, data } = await (await import('./pay.js')).payAndSettle(card,
      () => call('POST', '/switch/confirm'), { signal, onPaid: () => setText(st, 'Payment received. Moving you…') });
    if (declined) return setCardErr(`${declined} Nothing was charged: try another card.`);
    if (data.status === 'SWITCHED') return done(data);
    return setCardErr('The payment did not go through: try again or use another card.');
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const t = chosen();
    if (!t) {
      setText(st, 'Choose the event to switch to.');
      return form.querySelector('input[type=radio]:not([disabled])')?.focus();
    }
    const errs = questions ? questions.check() : {};
    const first = Object.keys(errs)[0];
    if (first) {
      setText(st, 'Please answer the questions marked above.');
      return form.querySelector(`[name="${first}"]`)?.focus();
    }
    lock(true);
    setCardErr('');
    setText(st, 'Switching…');
    try {
      if (card && answer && answer.eventId === t.eventId) return await confirmPaid();
      const { data } = await call('POST', '/switch', { eventId: t.eventId, ...(questions ? questions.body() : {}) });
      if (data.status === 'SWITCHED') return await done(data);
      answer = data;
      giveUp.hidden = false;
      setText(st, data.message);
      card = await (await import('./pay.js')).mountCardForm(cardHost, data);
      go.textContent = `Pay ${money(data.amountCents, data.currency)} and switch`;
      cardHost.querySelector('iframe')?.focus();
    } catch (e) {
      if (!signal.aborted) fail(e);
    } finally {
      if (!signal.aborted) lock(false);
    }
  });
  giveUp.addEventListener('click', async () => {
    lock(true);
    try {
      await call('DELETE', '/switch');
      await reload('Switch cancelled: the place held for you went back. Your registration is unchanged.');
    } catch (e) {
      if (!signal.aborted) {
        fail(e);
        lock(false);
      }
    }
  });
}

// A date of birth that makes `age` on race day (the day itself, that many years before).
function bornFor(age, raceDate) {
  if (age == null || !raceDate) return '';
  const [y, rest] = [Number(raceDate.slice(0, 4)), raceDate.slice(4)];
  return `${String(y - age).padStart(4, '0')}${rest === '-02-29' ? '-02-28' : rest}`;
}

export async function deferPlace(box, call, signal, reload) {
  const title = box.firstChild;
  let q;
  try {
    q = (await call('GET', '/deferral')).data;
  } catch (e) {
    if (!signal.aborted) box.replaceChildren(title, errorBox(e.message, () => deferPlace(box, call, signal, reload)));
    return;
  }
  const note = h('p', { testid: 'defer-note', 'data-credit': String(q.creditCents) }, q.note);
  if (!q.allowed) return box.replaceChildren(title, note);
  const st = h('p', { role: 'status', testid: 'defer-status' });
  const go = h('button', { type: 'button', testid: 'defer-confirm' },
    `Defer my place: ${money(q.creditCents, q.currency)} credit for ${q.nextRaceName}`);
  go.addEventListener('click', async () => {
    go.disabled = true;
    try {
      const { data } = await call('POST', '/deferral', { creditCents: q.creditCents });
      await reload(`${data.message} Your code: ${data.code}.`);
    } catch (e) {
      if (signal.aborted) return;
      setText(st, explain(e));
      say(st.textContent);
      go.disabled = false;
    }
  });
  box.replaceChildren(title, note, go, st);
}
