// Team entries, loaded only when a runner asks for them: on the race page, "Enter a team"
// holds the team's places at once (all or none); on the hold page of a team's hold, the
// captain fills in every member (the captain first) and pays once for the team. The API
// checks each member as a runner and names `members.<i>.<field>`, shown on that member's field.
import { api, now, withBusyRetry } from './api.js';
import {
  BUSY, DETAILS, duration, enc, errorBox, every, go, h, money, page, say, setText, statusLines, store,
} from './ui.js';
import { holdGone, toWaitingScreen } from './holdend.js';
import { normaliseDate, registrationBody, validate } from './validate.js';

const LABELS = { email: 'Email address', firstName: 'First name', lastName: 'Last name', dateOfBirth: 'Date of birth' };

// The race page's team chooser for one event: a size within the event's range, then the hold.
export function teamChooser(host, { raceId, race, ev, signal }) {
  const id = `team-size-${ev.eventId}`;
  const size = h('input', {
    id, type: 'number', inputmode: 'numeric', min: String(ev.teamMinSize), max: String(ev.teamMaxSize),
    value: String(ev.teamMinSize), testid: 'team-size',
  });
  const st = statusLines('team-status');
  const btn = h('button', { type: 'button', cls: 'primary', testid: 'hold-team' }, 'Hold the team\'s places');
  btn.addEventListener('click', async () => {
    const places = Number(size.value);
    if (!Number.isInteger(places) || places < ev.teamMinSize || places > ev.teamMaxSize) {
      return st.set(`A team has ${ev.teamMinSize} to ${ev.teamMaxSize} runners.`, 'err');
    }
    btn.disabled = true;
    st.set(`Holding ${places} places…`);
    try {
      const { data } = await withBusyRetry(() => api('POST', `/races/${enc(raceId)}/events/${enc(ev.eventId)}/teams`,
        { body: { places }, signal }), { signal, attempts: 10, onWait: () => st.set(BUSY, 'warn') });
      store.set(`hold:${data.holdId}`, {
        holdId: data.holdId, expiresAt: data.expiresAt, heldAt: now(), raceId, raceName: race.name,
        eventId: ev.eventId, eventName: ev.name, priceCents: data.priceCents, currency: ev.currency,
        raceDate: race.raceDate, minAge: ev.minAge, maxAge: ev.maxAge, ageRule: ev.ageRule, places,
      });
      return go(`/holds/${enc(data.holdId)}`);
    } catch (e) {
      if (signal.aborted) return;
      btn.disabled = false;
      st.set(e.message, 'err'); // NOT_ENOUGH_PLACES says how many are left
    }
  });
  host.replaceChildren(h('div', { cls: 'field' },
    h('label', { for: id }, `Runners in the team (${ev.teamMinSize} to ${ev.teamMaxSize})`), size), btn, ...st.el);
  size.focus();
}

// #/holds/{holdId} for a team's hold: every member's details, then the team's one payment.
export function teamPage(holdId, ctx) {
  const n = ctx.places;
  const { body, signal } = page(`Register a team: ${ctx.eventName || ''}`.trim());
  const state = store.get(`form:${holdId}`) || { teamName: '', members: Array.from({ length: n }, () => ({})) };
  const save = () => store.set(`form:${holdId}`, state);
  const fields = {}; // "members.<i>.<field>" | "teamName" -> { input, err }
  const rule = ctx.ageRule ? { eventName: ctx.eventName, minAge: ctx.minAge, maxAge: ctx.maxAge,
    ageRule: ctx.ageRule, raceDate: ctx.raceDate } : null;

  const setErr = (key, msg) => {
    const f = fields[key];
    if (!f) return false;
    f.err.textContent = msg || '';
    f.err.hidden = !msg;
    if (msg) f.input.setAttribute('aria-invalid', 'true');
    else f.input.removeAttribute('aria-invalid');
    return true;
  };
  const input = (key, label, value, attrs, onInput) => {
    const id = `f-${key.replace(/\./g, '-')}`;
    const err = h('p', { id: `${id}-err`, cls: 'field-error', testid: `error-${key}`, hidden: true });
    const el = h('input', { id, testid: `field-${key}`, 'aria-describedby': `${id}-err`, ...attrs });
    el.value = value || '';
    el.addEventListener('input', () => (onInput(el.value), save()));
    fields[key] = { input: el, err };
    return h('div', { cls: 'field' }, h('label', { for: id }, label), err, el);
  };
  const attrsOf = {
    email: { type: 'email', autocomplete: 'off', spellcheck: 'false', required: true },
    firstName: { maxlength: '100', required: true },
    lastName: { maxlength: '100', required: true },
    dateOfBirth: { inputmode: 'numeric', placeholder: 'YYYY-MM-DD', required: true },
  };
  // Each member's own answers to the event's questions and waiver (questions.js, loaded only for
  // an event that asks any), under their details.
  const askHosts = state.members.map(() => h('div', { testid: 'questions' }));
  const asked = []; // per member: the questions' controller (check, body), once loaded
  const members = state.members.map((m, i) => h('fieldset', { testid: 'team-member' },
    h('legend', {}, i === 0 ? 'Runner 1 (you, the captain)' : `Runner ${i + 1}`),
    ...DETAILS.map((f) => input(`members.${i}.${f}`, LABELS[f], m[f], attrsOf[f], (v) => { m[f] = v; })),
    askHosts[i]));
  const loadQuestions = async () => {
    const { data } = await withBusyRetry(() => api('GET',
      `/races/${enc(ctx.raceId)}/events/${enc(ctx.eventId)}/questions`, { signal }), { signal });
    if (!data.questions.length && !data.waiver) return;
    const { mountQuestions } = await import('./questions.js');
    state.members.forEach((m, i) => {
      asked[i] = mountQuestions(askHosts[i], data, {
        state: m, save, fields, raceDate: ctx.raceDate, setErr, prefix: `members.${i}.`,
      });
    });
  };

  const summary = h('div', { cls: 'alert', role: 'alert', tabindex: '-1', testid: 'error-summary', hidden: true });
  const showErrors = (errs) => {
    for (const k of Object.keys(fields)) setErr(k, '');
    const shown = Object.entries(errs).filter(([k, m]) => setErr(k, String(m)));
    summary.hidden = !shown.length;
    summary.replaceChildren(h('p', {}, h('strong', {}, 'Please fix:')), h('ul', {}, shown.map(([k, m]) =>
      h('li', {}, h('a', { href: `#${fields[k].input.id}`, onclick: (e) => (e.preventDefault(), fields[k].input.focus()) },
        `${k.startsWith('members.') ? `Runner ${Number(k.split('.')[1]) + 1}: ` : ''}${m}`)))));
    if (shown.length) summary.focus();
    return shown.length;
  };
  const check = () => {
    const errs = {};
    if (!String(state.teamName || '').trim()) errs.teamName = 'Give the team a name.';
    const seen = new Map();
    state.members.forEach((m, i) => {
      for (const [f, msg] of Object.entries(validate(m, DETAILS, undefined, rule))) errs[`members.${i}.${f}`] = msg;
      if (asked[i]) Object.assign(errs, asked[i].check());
      const email = String(m.email || '').trim().toLowerCase();
      if (email && seen.has(email)) errs[`members.${i}.email`] = `The same email as runner ${seen.get(email) + 1}.`;
      else if (email) seen.set(email, i);
    });
    return errs;
  };
  const bodyOf = () => ({
    teamName: String(state.teamName || '').trim(),
    members: state.members.map((m, i) => ({
      ...registrationBody({ ...m, dateOfBirth: normaliseDate(m.dateOfBirth) }), ...(asked[i] ? asked[i].body() : {}),
    })),
  });

  const total = ctx.priceCents != null ? money(ctx.priceCents * n, ctx.currency) : '';
  const cardHost = h('div', { cls: 'card-form', testid: 'card-form' });
  const cardErr = h('p', { cls: 'field-error', role: 'alert', testid: 'error-card', hidden: true });
  const payBtn = h('button', { type: 'submit', cls: 'primary', testid: 'submit-registration', hidden: true },
    `Pay ${total} for the team`);
  const sendBtn = h('button', { type: 'submit', cls: 'primary', testid: 'continue-button' },
    ctx.priceCents === 0 ? 'Register the team' : 'Continue to payment');
  const status = statusLines('form-status');
  const problem = h('div', { testid: 'form-error' });
  const form = h('form', { novalidate: true, testid: 'team-form' }, summary,
    input('teamName', 'Team name', state.teamName, { maxlength: '80', required: true }, (v) => { state.teamName = v; }),
    ...members, sendBtn, cardErr, cardHost, payBtn, ...status.el, problem);
  const lock = (on) => {
    for (const b of form.querySelectorAll('button')) b.disabled = on;
    form.setAttribute('aria-busy', on);
  };

  const timer = h('p', { cls: 'timer', testid: 'hold-countdown' });
  const exp = Date.parse(ctx.expiresAt);
  every(1000, () => {
    const left = exp - now();
    setText(timer, left > 0 ? `The team's ${n} places are held for ${duration(left)}.` : 'Your hold has expired.');
    timer.classList.toggle('warn', left < 120000);
  }, signal);

  let card = null;
  const finish = (id, retryAfter) => toWaitingScreen(holdId, ctx, id, retryAfter);
  const fail = (e) => {
    const errs = (e.body && e.body.fields) || {};
    if (Object.keys(errs).length && showErrors(errs)) return say(e.message);
    if (e.code === 'HOLD_EXPIRED' || e.status === 404) {
      lock(true);
      return holdGone(problem, ctx.raceId, 'This hold has expired or was released. You can hold the places again.');
    }
    problem.replaceChildren(errorBox(`${e.message} The team's details are saved.`));
  };

  async function send() {
    lock(true);
    problem.replaceChildren();
    status.set('Sending the team\'s details…');
    try {
      const { data, retryAfter } = await withBusyRetry(() => api('POST', `/holds/${enc(holdId)}/team`,
        { body: bodyOf(), signal }), { signal, attempts: 10, onWait: () => status.set(BUSY, 'warn') });
      if (data.status === 'QUEUED' || data.status === 'CONFIRMED') return finish(data.registrationId, retryAfter);
      status.set('Loading the secure card form…');
      card = await (await import('./pay.js')).mountCardForm(cardHost, data);
      sendBtn.hidden = true;
      payBtn.hidden = false;
      status.set(`One payment of ${total} for the team's ${n} places.`);
    } catch (e) {
      if (!signal.aborted) fail(e);
    } finally {
      if (!signal.aborted) lock(false);
    }
  }
  async function pay() {
    lock(true);
    cardErr.hidden = true;
    status.set('Paying…');
    try {
      const { declined, data, retryAfter } = await (await import('./pay.js')).payAndConfirm(card, holdId, {
        signal, onPaid: () => status.set('Payment received. Registering the team…'),
      });
      if (declined) {
        cardErr.textContent = `${declined} The places are still held: try another card.`;
        cardErr.hidden = false;
        return say(cardErr.textContent);
      }
      return finish(data.registrationId, retryAfter);
    } catch (e) {
      if (!signal.aborted) fail(e);
    } finally {
      if (!signal.aborted) lock(false);
    }
  }
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (form.getAttribute('aria-busy') === 'true') return;
    if (card) return pay();
    if (showErrors(check())) return;
    send();
  });

  body.replaceChildren(h('p', { testid: 'hold-summary' },
    [ctx.eventName, ctx.raceName, `${n} places`, total].filter(Boolean).join(' · ')),
  h('div', { cls: 'timer-box' }, timer), form);
  const retry = () => {
    problem.replaceChildren();
    loadQuestions().catch((e) => signal.aborted
      || problem.replaceChildren(errorBox(`Could not load this event's questions. ${e.message}`, retry)));
  };
  retry();
  import('./pay.js').catch(() => {});
}
