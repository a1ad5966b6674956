// The director's races: the list (state, places taken of each event's cap, money taken), a
// new race with its events, one race's page (edit with expectedVersion, events, publish, the
// registration window). Every save names the version it edited: a race changed meanwhile
// (another tab, another director of the account) answers 409 and the form keeps what was typed.
import { announce, h, show } from './dom.js';
import { fairnessSection } from './fairness.js';

const STATE_LABEL = { NOT_YET_OPEN: ['scheduled', 'Scheduled'], OPEN: ['open', 'Open'], CLOSED: ['closed', 'Closed'] };
const CURRENCIES = ['USD', 'EUR', 'GBP', 'CAD', 'AUD'];

// draft, scheduled, open, sold out (open with no place left in any event), closed.
export function stateOf(race, events = race.events) {
  if (!race.published) return ['draft', 'Draft'];
  if (race.status === 'OPEN' && events?.length && events.every((e) => e.placesLeft === 0)) return ['soldout', 'Sold out'];
  return STATE_LABEL[race.status] || ['', race.status];
}

export function money(cents, currency) {
  return new Intl.NumberFormat('en-US', { style: 'currency', currency }).format(cents / 100);
}

function localInput(iso) {
  // <input type=datetime-local> shows the director's local time.
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function isoFromLocal(value) {
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? value : d.toISOString();
}

function centsFrom(value) {
  const n = Number(String(value).replace(/[^0-9.]/g, ''));
  return Number.isFinite(n) && String(value).trim() !== '' ? Math.round(n * 100) : NaN;
}

// -- a form bound to the API's field names (name="events.0.cap" ↔ fields["events.0.cap"]) ----
function input(name, label, attrs = {}, hint) {
  const id = `f-${name.replace(/\./g, '-')}`;
  const control = attrs.options
    ? h('select', { id, name }, attrs.options.map((o) => h('option', { value: o, selected: o === attrs.value }, o)))
    : h(attrs.multiline ? 'textarea' : 'input', { id, name, ...attrs, options: undefined, multiline: undefined });
  const error = h('p', { id: `${id}-error`, class: 'error', hidden: true });
  control.setAttribute('aria-describedby', `${hint ? `${id}-hint ` : ''}${id}-error`);
  return h('div', { class: 'field', dataset: { field: name } }, h('label', { htmlFor: id }, label), hint ? h('p', { id: `${id}-hint`, class: 'hint' }, hint) : null, control, error);
}

function showFieldErrors(root, fields) {
  let first = null;
  for (const wrap of root.querySelectorAll('[data-field]')) {
    const message = fields?.[wrap.dataset.field] || '';
    const error = wrap.querySelector('.error');
    const control = wrap.querySelector('input, select, textarea');
    error.textContent = message;
    error.hidden = !message;
    control.setAttribute('aria-invalid', message ? 'true' : 'false');
    if (message && !first) first = control;
  }
  return first;
}

// Field errors the form has no control for (e.g. "events" when none is given) go to the alert.
function unplaced(root, fields) {
  const placed = new Set([...root.querySelectorAll('[data-field]')].map((w) => w.dataset.field));
  return Object.entries(fields || {}).filter(([k]) => !placed.has(k)).map(([k, v]) => `${k}: ${v}`);
}

function alertBox(testid) {
  return h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': testid });
}

function say(box, message, cls = 'alert') {
  box.className = cls;
  box.textContent = message || '';
  box.hidden = !message;
}

async function submitting(button, fn) {
  button.disabled = true;
  try {
    return await fn();
  } finally {
    button.disabled = false;
  }
}

function raceFields(race = {}) {
  const now = new Date();
  const opens = race.registrationOpensAt || new Date(now.getTime() + 86400000).toISOString();
  const closes = race.registrationClosesAt || new Date(now.getTime() + 30 * 86400000).toISOString();
  return [
    input('name', 'Race name', { value: race.name || '', required: true, maxLength: 150 }),
    input('location', 'Location', { value: race.location || '', maxLength: 150 }),
    input('raceDate', 'Race date', { type: 'date', value: race.raceDate || new Date(now.getTime() + 60 * 86400000).toISOString().slice(0, 10), required: true }),
    input('description', 'Description', { value: race.description || '', multiline: true, rows: 3, maxLength: 5000 }),
    input('currency', 'Currency', { options: CURRENCIES, value: race.currency || 'USD' }),
    input('registrationOpensAt', 'Registration opens', { type: 'datetime-local', value: localInput(opens), required: true }, 'Your local time.'),
    input('registrationClosesAt', 'Registration closes', { type: 'datetime-local', value: localInput(closes), required: true }, 'Your local time; by the race date.'),
    input('holdMinutes', 'Minutes a place is held while a runner registers', { type: 'number', min: 1, max: 60, value: race.holdMinutes ?? 10 }),
  ];
}

function readRace(form) {
  const v = (n) => form.elements[n].value;
  return {
    name: v('name').trim(),
    location: v('location').trim(),
    raceDate: v('raceDate'),
    description: v('description'),
    currency: v('currency'),
    registrationOpensAt: isoFromLocal(v('registrationOpensAt')),
    registrationClosesAt: isoFromLocal(v('registrationClosesAt')),
    holdMinutes: Number(v('holdMinutes')),
  };
}

function eventRow(i, event = {}) {
  return h('fieldset', { class: 'event', 'data-testid': 'event-fields' },
    h('legend', {}, `Event ${i + 1}`),
    input(`events.${i}.name`, 'Event name', { value: event.name || '', required: true, maxLength: 100 }),
    input(`events.${i}.cap`, 'Places (cap)', { type: 'number', min: 1, value: event.cap ?? '' }),
    input(`events.${i}.priceCents`, 'Price', { inputMode: 'decimal', value: event.priceCents ? (event.priceCents / 100).toFixed(2) : '' }, 'In the race currency, e.g. 45.00'),
  );
}

function readEvents(form) {
  const out = [];
  for (let i = 0; form.elements[`events.${i}.name`]; i++) {
    out.push({
      name: form.elements[`events.${i}.name`].value.trim(),
      cap: Number(form.elements[`events.${i}.cap`].value) || 0,
      priceCents: centsFrom(form.elements[`events.${i}.priceCents`].value) || 0,
    });
  }
  return out;
}

// -- the list ---------------------------------------------------------------------------------
export async function racesPage(api) {
  const { races } = await api.get('/races');
  const stats = await Promise.all(races.map((r) => api.get(`/races/${r.raceId}/stats`).catch(() => null)));
  const rows = races.map((race, i) => {
    const s = stats[i];
    const [cls, label] = stateOf(race, s?.events);
    const places = s ? s.events.map((e) => h('div', {}, `${e.name}: ${e.cap - e.placesLeft} of ${e.cap}`)) : '—';
    const taken = s ? s.events.reduce((n, e) => n + e.revenueCents - e.refundedCents, 0) : null;
    return h('tr', { 'data-testid': 'race-row', dataset: { raceId: race.raceId } },
      h('th', { scope: 'row' }, h('a', { href: `#/races/${encodeURIComponent(race.raceId)}` }, race.name)),
      h('td', {}, race.raceDate),
      h('td', {}, h('span', { class: `state ${cls}`, 'data-testid': 'race-state' }, label)),
      h('td', { 'data-testid': 'race-places' }, places),
      h('td', { class: 'num', 'data-testid': 'race-money' }, taken === null ? '—' : money(taken, race.currency || 'USD')),
    );
  });
  show(
    h('h1', {}, 'Your races'),
    h('p', {}, h('a', { href: '#/races/new', class: 'button', 'data-testid': 'new-race' }, 'New race')),
    races.length
      ? h('div', { class: 'scroll' }, h('table', { 'data-testid': 'races' },
          h('caption', { class: 'visually-hidden' }, 'Your races'),
          h('thead', {}, h('tr', {}, ...['Race', 'Date', 'State', 'Places taken', 'Money taken'].map((t) => h('th', { scope: 'col' }, t)))),
          h('tbody', {}, rows)))
      : h('p', { 'data-testid': 'no-races' }, 'You have no races yet.'),
  );
}

// -- a new race -------------------------------------------------------------------------------
export function newRacePage(api) {
  const box = alertBox('race-alert');
  const events = h('div', {}, eventRow(0));
  const add = h('button', { type: 'button', 'data-testid': 'add-event-row', onClick: () => {
    const row = eventRow(events.children.length);
    events.append(row);
    row.querySelector('input').focus();
  } }, 'Add another event');
  const save = h('button', { type: 'submit', class: 'primary', 'data-testid': 'create-race' }, 'Create race (as a draft)');
  const form = h('form', { noValidate: true, 'data-testid': 'race-form' }, box, ...raceFields(), h('h2', {}, 'Events'), events, add, h('div', { class: 'actions' }, save));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitting(save, async () => {
      say(box, '');
      showFieldErrors(form, null);
      try {
        // A new race is a draft: the runner site shows it once published.
        const race = await api.post('/races', { ...readRace(form), events: readEvents(form) });
        announce('Race created.');
        location.hash = `#/races/${encodeURIComponent(race.raceId)}`;
      } catch (err) {
        const first = showFieldErrors(form, err.fields);
        say(box, [err.message, ...unplaced(form, err.fields)].join(' '));
        (first || box).focus?.();
      }
    });
  });
  show(h('h1', {}, 'New race'), form);
}

// -- one race ---------------------------------------------------------------------------------
// The race's own pages. Results, questions, codes, teams, refund policy and the waitlist join
// this list with their issues.
export function subnav(raceId, current) {
  const base = `#/races/${encodeURIComponent(raceId)}`;
  const links = [
    ['settings', base, 'Settings and events'],
    ['live', `${base}/live`, 'Live'],
    ['runners', `${base}/runners`, 'Runners'],
    ['audit', `${base}/audit`, 'Audit trail'],
  ];
  return h('nav', { 'aria-label': 'This race', class: 'subnav' }, h('ul', {},
    links.map(([key, href, label]) => h('li', {}, h('a', { href, 'aria-current': key === current ? 'page' : null, 'data-testid': `tab-${key}` }, label)))));
}

export async function racePage(api, raceId) {
  let race = await api.get(`/races/${encodeURIComponent(raceId)}`);
  const box = alertBox('race-alert');
  const status = h('p', { role: 'status', 'data-testid': 'race-status' });
  const title = h('h1', {}, race.name);

  function summary() {
    const [cls, label] = stateOf(race);
    status.replaceChildren(
      'State: ', h('span', { class: `state ${cls}`, 'data-testid': 'race-state' }, label),
      ` · registration ${race.registrationState.toLowerCase()} · version ${race.version}`,
    );
    publish.textContent = race.published ? 'Back to draft' : 'Publish';
  }

  // The fields the director changed since the version the form shows (times compared as instants).
  function dirty() {
    const typed = readRace(form);
    const same = (k, v) => (k.endsWith('At') ? new Date(v).getTime() === new Date(race[k]).getTime() : JSON.stringify(v) === JSON.stringify(race[k]));
    return Object.fromEntries(Object.entries(typed).filter(([k, v]) => !same(k, v)));
  }

  function fill(from, keep = {}) {
    for (const k of Object.keys(readRace(form))) {
      if (!(k in keep)) form.elements[k].value = (k.endsWith('At') ? localInput(from[k]) : from[k]) ?? '';
    }
  }

  // A 409 on a save: keep what the director typed, show the latest version of every other
  // field, and edit on top of that version, so saving again applies the typed changes over it.
  async function changedMeanwhile(typed) {
    const latest = await api.get(`/races/${encodeURIComponent(raceId)}`);
    const theirs = Object.keys(readRace(form)).filter((k) => JSON.stringify(latest[k]) !== JSON.stringify(race[k]));
    race = latest;
    fill(latest, typed);
    title.textContent = latest.name;
    summary();
    say(box, `This race was changed meanwhile (now version ${latest.version})${theirs.length ? `: ${theirs.join(', ')} changed` : ''}. ` +
      'What you typed is kept; check it, then save again to apply it over the latest version.');
    box.focus();
  }

  const save = h('button', { type: 'submit', class: 'primary', 'data-testid': 'save-race' }, 'Save changes');
  const form = h('form', { noValidate: true, 'data-testid': 'race-form' }, ...raceFields(race), h('div', { class: 'actions' }, save));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitting(save, async () => {
      say(box, '');
      showFieldErrors(form, null);
      const changes = dirty();
      try {
        race = await api.patch(`/races/${encodeURIComponent(raceId)}`, { expectedVersion: race.version, ...changes });
        fill(race);
        title.textContent = race.name;
        summary();
        say(box, 'Saved.', 'note');
        announce('Saved.');
      } catch (err) {
        if (err.status === 409) return changedMeanwhile(changes);
        const first = showFieldErrors(form, err.fields);
        say(box, [err.message, ...unplaced(form, err.fields)].join(' '));
        first?.focus();
      }
    });
  });

  const publish = h('button', { type: 'button', 'data-testid': 'publish', onClick: () => submitting(publish, async () => {
    say(box, '');
    try {
      // Publishing checks the race is complete (409 RACE_INCOMPLETE names what is missing).
      const action = race.published ? 'unpublish' : 'publish';
      race = await api.post(`/races/${encodeURIComponent(raceId)}/${action}`, { expectedVersion: race.version });
      summary();
      announce(race.published ? 'Published: runners can see the race.' : 'Back to a draft: closed to runners.');
    } catch (err) {
      if (err.code === 'RACE_INCOMPLETE') {
        const first = showFieldErrors(form, err.fields);
        say(box, err.message);
        return (first || box).focus?.();
      }
      if (err.status === 409 && err.code === 'CONFLICT' && /version/.test(err.message)) return changedMeanwhile(dirty());
      say(box, err.message);
    }
  }) });

  const windowButtons = [['schedule', 'Schedule the window'], ['open', 'Open registration now'], ['close', 'Close registration']].map(([action, label]) =>
    h('button', { type: 'button', 'data-testid': `window-${action}`, onClick: (e) => submitting(e.currentTarget, async () => {
      say(box, '');
      try {
        const w = await api.post(`/races/${encodeURIComponent(raceId)}/window/${action}`);
        race = await api.get(`/races/${encodeURIComponent(raceId)}`);
        summary();
        announce(`Registration is ${w.registrationState.toLowerCase()}.`);
      } catch (err) {
        say(box, err.message);
      }
    }) }, label));

  const events = h('tbody', {}, race.events.map((ev) => eventEditRow(api, raceId, ev, () => race, (r) => { race = r; summary(); }, box)));
  const addEvent = newEventForm(api, raceId, () => race, (r) => {
    race = r;
    summary();
    events.replaceChildren(...race.events.map((ev) => eventEditRow(api, raceId, ev, () => race, (x) => { race = x; summary(); }, box)));
  });

  summary();
  show(
    h('p', {}, h('a', { href: '#/races' }, '← Your races')),
    title,
    status,
    box,
    h('div', { class: 'row' }, publish, ...windowButtons),
    subnav(raceId, 'settings'),
    h('h2', {}, 'Settings'),
    form,
    h('h2', {}, 'Events'),
    h('div', { class: 'scroll' }, h('table', { 'data-testid': 'events' },
      h('thead', {}, h('tr', {}, ...['Event', 'Places (cap)', 'Price', 'Taken', ''].map((t) => h('th', { scope: 'col' }, t)))),
      events)),
    h('h3', {}, 'Add an event'),
    addEvent,
    await fairnessSection(api, raceId),
  );
}

function eventEditRow(api, raceId, ev, current, updated, box) {
  const id = (k) => `ev-${ev.eventId}-${k}`;
  const name = h('input', { id: id('name'), value: ev.name, 'aria-label': `Name of ${ev.name}` });
  const cap = h('input', { id: id('cap'), type: 'number', min: 1, value: ev.cap, 'aria-label': `Places of ${ev.name}` });
  const price = h('input', { id: id('price'), inputMode: 'decimal', value: (ev.priceCents / 100).toFixed(2), 'aria-label': `Price of ${ev.name}` });
  const error = h('p', { class: 'error', hidden: true });
  const save = h('button', { type: 'button', 'data-testid': 'save-event', onClick: () => submitting(save, async () => {
    error.hidden = true;
    const race = current();
    const asked = { name: name.value.trim(), cap: Number(cap.value), priceCents: centsFrom(price.value) };
    const changes = Object.fromEntries(Object.entries(asked).filter(([k, v]) => v !== ev[k]));
    try {
      const r = await api.patch(`/races/${encodeURIComponent(raceId)}/events/${encodeURIComponent(ev.eventId)}`, { expectedVersion: race.version, ...changes });
      Object.assign(ev, r.events.find((e) => e.eventId === ev.eventId));
      updated(r);
      announce(`${ev.name} saved.`);
    } catch (err) {
      if (err.status === 409) {
        updated(await api.get(`/races/${encodeURIComponent(raceId)}`));
        error.textContent = 'The race was changed meanwhile; what you typed is kept: save again to apply it.';
      } else {
        error.textContent = Object.values(err.fields || {}).join(' ') || err.message;
      }
      error.hidden = false;
    }
  }) }, 'Save');
  return h('tr', { 'data-testid': 'event-row' },
    h('td', {}, name), h('td', {}, cap), h('td', {}, price),
    h('td', { class: 'num', 'data-testid': 'event-taken' }, `${ev.taken} of ${ev.cap}`),
    h('td', {}, save, error));
}

function newEventForm(api, raceId, current, updated) {
  const box = alertBox('event-alert');
  const save = h('button', { type: 'submit', 'data-testid': 'add-event' }, 'Add event');
  const fields = [
    input('name', 'Event name', { required: true, maxLength: 100 }),
    input('cap', 'Places (cap)', { type: 'number', min: 1 }),
    input('priceCents', 'Price', { inputMode: 'decimal' }, 'In the race currency, e.g. 45.00'),
  ];
  for (const f of fields) {
    const control = f.querySelector('input');
    control.id = `new-event-${control.name}`;
    f.querySelector('label').htmlFor = control.id;
  }
  const form = h('form', { noValidate: true, 'data-testid': 'event-form' }, box, ...fields, save);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitting(save, async () => {
      say(box, '');
      showFieldErrors(form, null);
      const v = (n) => form.elements[n].value;
      try {
        const r = await api.post(`/races/${encodeURIComponent(raceId)}/events`, { name: v('name').trim(), cap: Number(v('cap')) || 0, priceCents: centsFrom(v('priceCents')) || 0 });
        form.reset();
        updated(r);
        announce('Event added.');
      } catch (err) {
        showFieldErrors(form, err.fields);
        say(box, err.message);
      }
    });
  });
  void current;
  return form;
}
