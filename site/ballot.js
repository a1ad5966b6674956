// An event's ballot (racecap.ballot), one route of the app (ballotPage) for five pages:
//   #/ballot/apply/{raceId}/{eventId}  apply, alone or with a group: names, addresses and dates of
//                                      birth, then a proof-of-work solved here (pow.js, the queue's own)
//   #/ballot/{token}                   the emailed link: confirms the address (safe to repeat), keeps the
//                                      token for this tab and replaces the address with #/ballot
//   #/ballot                           my application (the kept token), and withdrawing it
//   #/ballot/draw/{raceId}/{eventId}   the draw as published: the seed, the list, how to check it (ballotdraw.js)
//   #/ballot/guaranteed/{raceId}/{eventId}  a guaranteed entry's code holds a kept place (guaranteed.js)
import { api, withBusyRetry } from './api.js';
import { device } from './identity.js';
import { solve } from './pow.js';
import { askFirst, focusState } from './ask.js';
import { backLink, enc, errorBox, go, h, page, retitle, say, setText, store, when } from './ui.js';

const HEADER = 'X-Racecap-Ballot';
const KEY = 'ballot';
const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]{2,}$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const FIELDS = [['firstName', 'First name', 'text', 'given-name'], ['lastName', 'Last name', 'text', 'family-name'],
  ['email', 'Email address', 'email', 'email'], ['dateOfBirth', 'Date of birth', 'date', 'bday']];

export function ballotPage(rest) {
  const [first, raceId, eventId] = (rest || '').split('/');
  if (!rest) return applicationPage();
  if (first === 'apply' && eventId) return applyPage(decodeURIComponent(raceId), decodeURIComponent(eventId));
  if (first === 'draw' && eventId) {
    return import('./ballotdraw.js').then((m) => m.drawPage(decodeURIComponent(raceId), decodeURIComponent(eventId)));
  }
  if (first === 'guaranteed' && eventId) {
    return import('./guaranteed.js').then((m) => m.guaranteedPage(decodeURIComponent(raceId), decodeURIComponent(eventId)));
  }
  return confirmPage(rest);
}

// One runner's fields; `n` is the runner's index (0: the applicant), its API path their prefix.
function runnerFields(n) {
  const prefix = n === 0 ? '' : `partners.${n - 1}.`;
  const inputs = {};
  const rows = FIELDS.map(([name, label, type, ac]) => {
    const id = `bal-${n}-${name}`;
    const err = h('p', { cls: 'field-error', id: `${id}-err`, testid: `${id}-error` });
    const input = h('input', { id, name, type, autocomplete: n === 0 ? ac : 'off', required: true,
      'aria-describedby': `${id}-err`, testid: id });
    inputs[prefix + name] = { input, err, name };
    return h('div', { cls: 'field' }, h('label', { for: id }, label), input, err);
  });
  // The event's questions for this runner (questions.js, mounted when the event asks any).
  const host = h('div', { testid: `bal-${n}-questions` });
  return { inputs, rows: [...rows, host], host, qfields: {}, state: { answers: {}, waiver: {} }, asked: null, prefix };
}

function applyPage(raceId, eventId) {
  const { h1, body, signal } = page('Apply to the ballot');
  const st = h('p', { role: 'status', testid: 'bal-status' });
  body.append(h('p', { cls: 'loading' }, 'Loading…'));
  (async () => {
    let race;
    try {
      race = (await api('GET', `/races/${enc(raceId)}`, { signal })).data;
    } catch (e) {
      if (!signal.aborted) body.replaceChildren(errorBox(e.message), backLink(raceId));
      return;
    }
    const ev = (race.events || []).find((e) => e.eventId === eventId);
    if (!ev || !ev.ballot) return body.replaceChildren(errorBox('This event has no ballot.'), backLink(raceId));
    retitle(h1, `Apply to the ballot: ${race.name}, ${ev.name}`);
    // The event's questions, asked at apply as at registration (the waiver is accepted then).
    let set = null;
    try {
      const q = (await api('GET', `/races/${enc(raceId)}/events/${enc(eventId)}/questions`, { signal })).data;
      if (q.questions.length) set = { ...q, waiver: null, mount: (await import('./questions.js')).mountQuestions };
    } catch {
      // Asked anyway: the server checks the answers and names any question it wants answered.
    }
    const ask = (r) => {
      if (set) {
        r.asked = set.mount(r.host, set, { state: r.state, save: () => {}, fields: r.qfields, raceDate: race.raceDate,
          setErr: (k, msg) => bad(k, msg || ''), prefix: r.prefix });
      }
    };
    const runners = [runnerFields(0)];
    ask(runners[0]);
    const group = h('div', { testid: 'bal-group' });
    const most = ev.teamMaxSize || 1;
    const add = h('button', { type: 'button', testid: 'bal-add-runner', hidden: most < 2 }, 'Add a runner to my group');
    const drop = h('button', { type: 'button', testid: 'bal-drop-runner', hidden: true }, 'Remove the last runner');
    const sync = () => {
      add.hidden = runners.length >= most;
      drop.hidden = runners.length < 2;
    };
    add.addEventListener('click', () => {
      const r = runnerFields(runners.length);
      runners.push(r);
      ask(r);
      const box = h('fieldset', { testid: `bal-runner-${runners.length - 1}` },
        h('legend', {}, `Runner ${runners.length}`), r.rows);
      group.append(box);
      sync();
      r.rows[0].querySelector('input').focus();
    });
    drop.addEventListener('click', () => {
      runners.pop();
      group.lastChild.remove();
      sync();
      add.hidden ? drop.focus() : add.focus();
    });
    const send = h('button', { type: 'submit', cls: 'primary', testid: 'bal-apply' }, 'Apply');
    const form = h('form', { novalidate: true, testid: 'bal-form' },
      h('fieldset', {}, h('legend', {}, 'You'), runners[0].rows), group,
      h('p', {}, add, ' ', drop), send, st);
    const all = () => Object.assign({}, ...runners.map((r) => ({ ...r.inputs, ...r.qfields })));
    const bad = (key, msg) => {
      const f = all()[key];
      if (!f) return false;
      setText(f.err, msg);
      f.err.hidden = !msg;
      if (msg) f.input.setAttribute('aria-invalid', 'true');
      else f.input.removeAttribute('aria-invalid');
      return !!msg;
    };
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      for (const { input, err } of Object.values(all())) (setText(err, ''), input.removeAttribute('aria-invalid'));
      setText(st, '');
      const values = runners.map((r) => ({
        ...Object.fromEntries(Object.values(r.inputs).map(({ input, name }) => [name, input.value.trim()])),
        ...(r.asked ? { answers: r.asked.body().answers } : {}),
      }));
      runners.forEach((r) => r.asked && r.asked.check());
      values.forEach((v, n) => {
        const p = n === 0 ? '' : `partners.${n - 1}.`;
        if (!v.firstName) bad(`${p}firstName`, 'Enter a first name.');
        if (!v.lastName) bad(`${p}lastName`, 'Enter a last name.');
        if (!EMAIL.test(v.email)) bad(`${p}email`, 'Enter an email address like name@example.com.');
        if (!DATE.test(v.dateOfBirth)) bad(`${p}dateOfBirth`, 'Enter a date of birth.');
      });
      const wrongNow = Object.values(all()).find(({ input }) => input.hasAttribute('aria-invalid'));
      if (wrongNow) return wrongNow.input.focus();
      send.disabled = true;
      try {
        await device(signal);
        setText(st, 'Proving this is a person, not a script: a few seconds of work for your device…');
        const ch = (await withBusyRetry(() => api('POST', `/races/${enc(raceId)}/queue/challenge`, { signal }), { signal })).data;
        const nonce = await solve(ch.challenge, ch.difficulty, { signal });
        const [me, ...partners] = values;
        const { data } = await api('POST', `/races/${enc(raceId)}/events/${enc(eventId)}/ballot`,
          { body: { ...me, partners, challenge: ch.challenge, nonce }, signal });
        retitle(h1, 'Check your inbox');
        body.replaceChildren(h('p', { role: 'status', testid: 'bal-sent' }, data.message), backLink(raceId));
        say(data.message);
        body.querySelector('a').focus();
      } catch (err) {
        if (signal.aborted) return;
        const wrong = Object.entries((err.body && err.body.fields) || {}).filter(([k, msg]) => bad(k, msg));
        if (wrong.length) all()[wrong[0][0]].input.focus();
        setText(st, wrong.length ? '' : err.message);
        send.disabled = false;
      }
    });
    const tz = race.timeZone;
    body.replaceChildren(
      h('p', {}, `Places in ${ev.name} are drawn from the applications taken until ${when(ev.ballot.closesAt, tz)}; `
        + `the draw is at ${when(ev.ballot.drawAt, tz)}. One application per person. `
        + (most > 1 ? `A group of up to ${most} applies together and is drawn together or not at all. ` : '')
        + 'Each runner gets an email to confirm their address: an application counts once confirmed.'),
      form, backLink(raceId));
  })();
}

// The emailed link: confirm (a repeat answers the same), keep the token, show the application.
function confirmPage(token) {
  const { h1, body, signal } = page('Confirming your application');
  body.append(h('p', { role: 'status', testid: 'bal-confirm-status' }, 'Confirming…'));
  (async () => {
    try {
      await api('POST', '/ballot/confirm', { body: { token }, signal });
      store.set(KEY, token);
      go('/ballot', true);
    } catch (e) {
      if (signal.aborted) return;
      retitle(h1, 'Not confirmed');
      body.replaceChildren(errorBox(e.message), backLink());
    }
  })();
}

function applicationPage() {
  const { h1, body, signal } = page('My ballot application');
  const kept = store.get(KEY);
  if (!kept) {
    body.append(h('p', { testid: 'bal-no-link' }, 'Open the link in your ballot email to see your application.'), backLink());
    return;
  }
  const call = (method) => api(method, '/ballot/me', { signal, headers: { [HEADER]: kept } });

  async function show(announce) {
    let me;
    try {
      me = (await call('GET')).data;
    } catch (e) {
      if (signal.aborted) return;
      body.replaceChildren(errorBox(e.message, e.status !== 401 && e.status !== 404 && (() => show())), backLink());
      return;
    }
    retitle(h1, `Ballot: ${me.raceName}, ${me.eventName}`);
    const rows = [
      me.result && ['Result', me.result === 'WON' ? 'A place: claim it from your email' : `Number ${me.waitlistNumber} on the waitlist`, 'bal-result'],
      ['Application', me.applicationId, 'bal-id'],
      me.groupId && ['Group', `${me.groupSize} runners, drawn together`, 'bal-group-size'],
      me.drawAt && ['The draw', when(me.drawAt), 'bal-draw-at'],
      ...(me.answers || []).map((a) => [a.label, a.text, `bal-answer-${a.questionId}`]),
    ].filter(Boolean);
    const status = h('p', { role: 'status', testid: 'bal-state', 'data-state': me.state }, me.message);
    const open = me.ballot === 'OPEN' || me.ballot === 'UPCOMING';
    body.replaceChildren(status,
      h('dl', {}, rows.flatMap(([dt, dd, testid]) => [h('dt', {}, dt), h('dd', { testid }, dd)])),
      me.state !== 'WITHDRAWN' && open ? withdrawSection() : '',
      h('p', {}, h('a', { href: `#/ballot/draw/${enc(me.raceId)}/${enc(me.eventId)}`, testid: 'bal-draw-link' },
        'The draw, and how to check it')),
      backLink(me.raceId));
    if (announce) say(me.message);
  }

  function withdrawSection() {
    const box = h('section', { 'aria-labelledby': 'bal-withdraw-title', testid: 'bal-withdraw' },
      h('h2', { id: 'bal-withdraw-title' }, 'Withdraw my application'));
    const start = h('button', { type: 'button', testid: 'bal-withdraw-start' }, 'Withdraw my application');
    box.append(h('p', { cls: 'muted' }, 'Your name, address and date of birth are deleted at once. The rest of '
      + 'your group stays in the ballot. You may apply again until the ballot closes.'), start);
    askFirst(start, { id: 'bal-withdraw', question: 'Withdraw your application? It leaves the draw.',
      yes: 'Yes, withdraw it', no: 'No, keep it', label: 'Withdraw your application?' }, async () => {
      await call('DELETE');
      await show(true);
      focusState('bal-state');
    });
    return box;
  }

  show(true);
}
