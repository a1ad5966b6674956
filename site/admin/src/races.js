// The director's races: the list (state, places taken of each event's cap, money taken), a
// new race with its events, one race's page (edit with expectedVersion, events, who can see it,
// the registration window as the API has it). Every save names the version it edited: a race
// changed meanwhile (another tab, another director of the account) answers 409 and the form
// keeps what was typed.
import { announce, h, savedNote, show } from './dom.js';
import { fairnessSection } from './fairness.js';
import { policySection } from './policy.js';
import { browserZone, fromZoneInput, inputFromMinor, knownZone, minorFrom, money, offsetLabel, showInZone, toZoneInput, zoneNames } from './zone.js';

export { money } from './zone.js';

// The window's phase (GET …/window, racecap.window.models.WindowPhase) in a word.
const PHASE_LABEL = {
  NOT_SCHEDULED: ['unscheduled', 'Not scheduled'],
  SCHEDULED: ['scheduled', 'Scheduled'],
  WARMING: ['scheduled', 'Warming up'],
  OPEN: ['open', 'Open'],
  CLOSED: ['closed', 'Closed'],
};
// The API's currencies (racecap.setup.models.Currency); JPY is a zero-decimal currency.
const CURRENCIES = ['USD', 'EUR', 'GBP', 'CAD', 'AUD', 'NZD', 'CHF', 'SEK', 'NOK', 'DKK', 'JPY'];
const LISTING_LABEL = { DRAFT: 'Draft: closed to runners', UNLISTED: 'Unlisted: open by its link only', LISTED: 'Listed: on the race list' };
// The window is read again at its next change of phase, and at least this often while shown
// (another tab or director may act on it); soon after a time that has passed, until the
// workflow's task has run (it does within seconds).
const POLL_IDLE_MS = 30_000;
const POLL_SOON_MS = 2_000;

// draft, not scheduled, scheduled, warming up, open, sold out (open with no place left in any
// event), closed: from the window's phase when it was read (the race's status says only
// NOT_YET_OPEN, whether or not anything will open it).
export function stateOf(race, events = race.events, win = null) {
  if (!race.published) return ['draft', 'Draft'];
  const phase = win?.phase || { OPEN: 'OPEN', CLOSED: 'CLOSED' }[race.status];
  if (phase === 'OPEN' && events?.length && events.every((e) => e.placesLeft === 0)) return ['soldout', 'Sold out'];
  return PHASE_LABEL[phase] || ['unscheduled', 'Not open yet'];
}

// The window in one sentence, in the race's zone: what runners meet now and what happens next.
// A draft is closed to runners whatever the window does, and the sentence says so first.
export function windowWords(race, win) {
  const at = (iso) => showInZone(iso, race.timeZone);
  const opens = at(win.registrationOpensAt);
  const closes = at(win.registrationClosesAt);
  const wf = win.workflow;
  const running = wf?.status === 'RUNNING';
  if (!race.published) {
    if (win.phase === 'OPEN') return 'Draft: registration is open, but runners cannot reach a draft. Publish the race, or close registration.';
    if (win.phase === 'SCHEDULED' || win.phase === 'WARMING') return `Draft: scheduled for ${opens}, but runners cannot reach a draft until it is published.`;
    return 'Draft: closed to runners. Publish the race to schedule or open registration.';
  }
  switch (win.phase) {
    case 'SCHEDULED':
      return `Scheduled for ${opens}; closes ${closes}.`;
    case 'WARMING':
      return `Scheduled for ${opens}: warming up now (caches filled, places checked before the opening).`;
    case 'OPEN':
      return running
        ? `Open until ${closes}.`
        : `Open, but nothing will close it at ${closes}: the window's workflow is not running. Open it again to restart that, or close it now.`;
    case 'CLOSED':
      return new Date(win.registrationClosesAt).getTime() <= Date.now()
        ? `Closed: registration closed ${closes}.`
        : `Closed by hand. Schedule the window to follow the planned times again (${opens} to ${closes}), or open it now.`;
    default:
      return `Not scheduled: nothing will open registration. Schedule the window to open it ${opens}, or open it now.`;
  }
}

function workflowWords(race, win) {
  const wf = win.workflow;
  if (!wf) return 'No workflow: nothing changes the window by itself.';
  const what = wf.mode === 'schedule' ? 'follows the planned times' : 'opened by hand, closes on time';
  const state = wf.status === 'RUNNING' ? 'running' : `not running (${wf.status.toLowerCase()})`;
  return `Workflow ${wf.execution}: ${state}; it ${what}. Started ${showInZone(wf.startedAt, race.timeZone)}.`;
}

/** When to read the window again: at its next time, soon once a time has passed and the
 * phase has not followed yet, else at the idle pace. */
export function pollDelay(win, now = Date.now()) {
  const wf = win?.workflow;
  if (!wf || wf.status !== 'RUNNING') return POLL_IDLE_MS;
  const t = (iso) => new Date(iso).getTime();
  const behind = (now >= t(wf.opensAt) && !['OPEN', 'CLOSED'].includes(win.phase)) || (now >= t(wf.closesAt) && win.phase !== 'CLOSED');
  if (behind) return POLL_SOON_MS;
  const next = [wf.warmUpAt, wf.opensAt, wf.closesAt].map(t).filter((x) => x > now);
  const until = next.length ? Math.min(...next) - now + 250 : POLL_IDLE_MS;
  return Math.max(POLL_SOON_MS, Math.min(POLL_IDLE_MS, until));
}

// The runners' site's pages for the race (site/app.js routes): the race page and, per event,
// its results page. Both are on the site's origin, the console being under /admin/.
export function publicLinks(race) {
  const site = `${location.origin}/`;
  const r = encodeURIComponent(race.raceId);
  return {
    race: `${site}#/races/${r}`,
    results: race.events.map((e) => [e.name, `${site}#/races/${r}/events/${encodeURIComponent(e.eventId)}/results`]),
  };
}

// An amount the director typed, in the smallest unit; a wrong or empty one is sent as the text
// typed, so that the API's own field error names the field (not as 0: 0 is a free entry).
function amountFrom(value, currency) {
  const minor = minorFrom(value, currency);
  return Number.isNaN(minor) ? value : minor;
}

// The zone picker's names, once per page (a datalist: typing filters ~400 IANA names).
function zoneList() {
  let list = document.getElementById('zone-names');
  if (!list) list = h('datalist', { id: 'zone-names' }, zoneNames().map((z) => h('option', { value: z })));
  return list;
}

// -- a form bound to the API's field names (name="events.0.cap" ↔ fields["events.0.cap"]) ----
function input(name, label, attrs = {}, hint) {
  const id = `f-${name.replace(/\./g, '-')}`;
  const control = attrs.options
    ? h('select', { id, name }, attrs.options.map((o) => h('option', { value: o, selected: o === attrs.value }, o)))
    : h(attrs.multiline ? 'textarea' : 'input', { id, name, ...attrs, options: undefined, multiline: undefined, list: undefined });
  if (attrs.list) control.setAttribute('list', attrs.list); // input.list is read-only as a property
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

const zoneHint = (zone) => `In the race's time zone, ${zone} (${knownZone(zone) ? offsetLabel(zone) : 'not a zone'}).`;

function raceFields(race = {}) {
  const now = new Date();
  const zone = race.timeZone || browserZone();
  const opens = race.registrationOpensAt || new Date(now.getTime() + 86400000).toISOString();
  const closes = race.registrationClosesAt || new Date(now.getTime() + 30 * 86400000).toISOString();
  return [
    input('name', 'Race name', { value: race.name || '', required: true, maxLength: 150 }),
    input('location', 'Location', { value: race.location || '', maxLength: 150 }),
    input('timeZone', 'Time zone', { value: zone, list: 'zone-names', required: true, maxLength: 64, autocomplete: 'off', spellcheck: false },
      "An IANA name such as Europe/Paris or America/Denver. The race date, the registration window and price changes are in this zone, whatever your computer's zone."),
    zoneList(),
    input('raceDate', 'Race date', { type: 'date', value: race.raceDate || new Date(now.getTime() + 60 * 86400000).toISOString().slice(0, 10), required: true }),
    input('description', 'Description', { value: race.description || '', multiline: true, rows: 3, maxLength: 5000 }),
    input('currency', 'Currency', { options: CURRENCIES, value: race.currency || 'USD' }),
    input('registrationOpensAt', 'Registration opens', { type: 'datetime-local', value: toZoneInput(opens, knownZone(zone) ? zone : 'UTC'), required: true }, zoneHint(zone)),
    input('registrationClosesAt', 'Registration closes', { type: 'datetime-local', value: toZoneInput(closes, knownZone(zone) ? zone : 'UTC'), required: true }, `${zoneHint(zone)} By the race date.`),
    input('holdMinutes', 'Minutes a place is held while a runner registers', { type: 'number', min: 1, max: 60, value: race.holdMinutes ?? 10 }),
    // The API's retention (racecap.races.rules: 45 to 3650 days after the race).
    input('retentionDays', "Days after the race that runners' personal data is kept", { type: 'number', min: 45, max: 3650, value: race.retentionDays ?? 365 },
      `Then their emails, dates of birth and payment references are deleted${race.personalDataDeletedOn ? ` (on ${race.personalDataDeletedOn} as saved)` : ''}; names, bibs, results and figures stay.`),
  ];
}

const TIME_FIELDS = ['registrationOpensAt', 'registrationClosesAt'];

// The zone the form's wall-clock times are in: the one typed, once it is a zone.
function formZone(form) {
  const typed = form.elements.timeZone.value.trim();
  return knownZone(typed) ? typed : form.dataset.zone || 'UTC';
}

// A new zone keeps the instants (as the API does on a zone change): the wall-clock fields
// are re-shown in it, and their hints name it.
function followZone(form) {
  form.dataset.zone = formZone(form);
  form.elements.timeZone.addEventListener('change', () => {
    const before = form.dataset.zone;
    const after = formZone(form);
    if (after === before) return;
    for (const k of TIME_FIELDS) {
      const el = form.elements[k];
      if (el.value) el.value = toZoneInput(fromZoneInput(el.value, before), after);
      const hint = form.querySelector(`#${el.id}-hint`);
      if (hint) hint.textContent = `${zoneHint(after)}${k === 'registrationClosesAt' ? ' By the race date.' : ''}`;
    }
    form.dataset.zone = after;
    form.dispatchEvent(new CustomEvent('zonechange', { detail: { before, after } }));
  });
}

function readRace(form) {
  const v = (n) => form.elements[n].value;
  const zone = formZone(form);
  return {
    name: v('name').trim(),
    location: v('location').trim(),
    timeZone: v('timeZone').trim(),
    raceDate: v('raceDate'),
    description: v('description'),
    currency: v('currency'),
    registrationOpensAt: fromZoneInput(v('registrationOpensAt'), zone),
    registrationClosesAt: fromZoneInput(v('registrationClosesAt'), zone),
    holdMinutes: Number(v('holdMinutes')),
    retentionDays: Number(v('retentionDays')),
  };
}

// A new race's event: its places and price, and (as the create call takes them) its age rule
// and later prices, so that a race is set up in one go. Team entries and the waitlist are
// the event's settings once the race exists.
function eventRow(i, event = {}) {
  const base = `events.${i}`;
  const tiers = h('div', { class: 'tiers', 'data-testid': 'new-tiers' });
  const add = h('button', { type: 'button', 'data-testid': 'new-add-tier', onClick: () => {
    const row = tierRow(base, tiers.children.length);
    tiers.append(row);
    row.querySelector('input').focus();
  } }, 'Add a price change');
  return h('fieldset', { class: 'event', 'data-testid': 'event-fields' },
    h('legend', {}, `Event ${i + 1}`),
    input(`${base}.name`, 'Event name', { value: event.name || '', required: true, maxLength: 100 }),
    input(`${base}.cap`, 'Places (cap)', { type: 'number', min: 1, value: event.cap ?? '' }),
    input(`${base}.priceCents`, 'Price', { inputMode: 'decimal', value: '' }, 'In the race currency, e.g. 45.00; the price until the first price change below.'),
    h('fieldset', { class: 'sub' }, h('legend', {}, 'Age rule, on race day'), h('div', { class: 'grid' },
      input(`${base}.minAge`, 'Minimum age on race day', { type: 'number', min: 0, max: 120, value: 5 }),
      input(`${base}.maxAge`, 'Maximum age on race day', { type: 'number', min: 0, max: 120, value: '' }, 'Leave empty for no maximum.'))),
    h('fieldset', { class: 'sub' }, h('legend', {}, 'Price changes by date'),
      h('p', { class: 'hint' }, "Times in the race's time zone. None: the price above holds throughout."), tiers, add),
  );
}

function tierRow(base, j) {
  const row = h('div', { class: 'tier', 'data-testid': 'new-tier-row' },
    input(`${base}.priceTiers.${j}.startsAt`, `Price change ${j + 1} starts`, { type: 'datetime-local' }),
    input(`${base}.priceTiers.${j}.priceCents`, `Price change ${j + 1} price`, { inputMode: 'decimal' }));
  return row;
}

function readEvents(form) {
  const out = [];
  const currency = form.elements.currency.value;
  const zone = formZone(form);
  const value = (name) => form.elements[name]?.value ?? '';
  for (let i = 0; form.elements[`events.${i}.name`]; i++) {
    const base = `events.${i}`;
    const event = {
      name: value(`${base}.name`).trim(),
      cap: Number(value(`${base}.cap`)) || 0,
      priceCents: amountFrom(value(`${base}.priceCents`), currency),
      minAge: Number(value(`${base}.minAge`) || 0),
      priceTiers: [],
    };
    if (value(`${base}.maxAge`).trim()) event.maxAge = Number(value(`${base}.maxAge`));
    for (let j = 0; form.elements[`${base}.priceTiers.${j}.startsAt`]; j++) {
      const starts = value(`${base}.priceTiers.${j}.startsAt`);
      const price = value(`${base}.priceTiers.${j}.priceCents`);
      if (!starts && !price.trim()) continue; // a row added and left empty
      event.priceTiers.push({ startsAt: starts ? fromZoneInput(starts, zone) : '', priceCents: amountFrom(price, currency) });
    }
    out.push(event);
  }
  return out;
}

// -- the list ---------------------------------------------------------------------------------
export async function racesPage(api) {
  const { races } = await api.get('/races');
  const enc = encodeURIComponent;
  const [stats, windows] = await Promise.all([
    Promise.all(races.map((r) => api.get(`/races/${enc(r.raceId)}/stats`).catch(() => null))),
    Promise.all(races.map((r) => api.get(`/races/${enc(r.raceId)}/window`).catch(() => null))),
  ]);
  const rows = races.map((race, i) => {
    const s = stats[i];
    const [cls, label] = stateOf(race, s?.events, windows[i]);
    const places = s ? s.events.map((e) => h('div', {}, `${e.name}: ${e.cap - e.placesLeft} of ${e.cap}`)) : '—';
    const taken = s ? s.events.reduce((n, e) => n + e.revenueCents - e.refundedCents, 0) : null;
    return h('tr', { 'data-testid': 'race-row', dataset: { raceId: race.raceId } },
      h('th', { scope: 'row' }, h('a', { href: `#/races/${encodeURIComponent(race.raceId)}` }, race.name)),
      h('td', {}, race.raceDate),
      h('td', {}, h('span', { class: `state ${cls}`, 'data-testid': 'race-state' }, label)),
      h('td', { 'data-testid': 'race-places' }, places),
      h('td', { class: 'num', 'data-testid': 'race-money' }, taken === null ? '—' : money(taken, race.currency)),
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
  const form = h('form', { noValidate: true, 'data-testid': 'race-form' }, box, ...raceFields(), h('h2', {}, 'Events'),
    h('p', { class: 'hint' }, "Team entries and an event's waitlist are set in the event's settings once the race is created."),
    events, add, h('div', { class: 'actions' }, save));
  followZone(form);
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
// The race's own pages. Questions, codes, teams and the waitlist join this list with their
// issues; the refund policy (runners' own changes) is part of the settings page.
export function subnav(raceId, current) {
  const base = `#/races/${encodeURIComponent(raceId)}`;
  const links = [
    ['settings', base, 'Settings and events'],
    ['questions', `${base}/questions`, 'Questions and waiver'],
    ['live', `${base}/live`, 'Live'],
    ['runners', `${base}/runners`, 'Runners'],
    ['results', `${base}/results`, 'Results'],
    ['codes', `${base}/codes`, 'Discount codes'],
    ['waitlist', `${base}/waitlist`, 'Waitlist'],
    ['ballot', `${base}/ballot`, 'Ballot'],
    ['audit', `${base}/audit`, 'Audit trail'],
  ];
  return h('nav', { 'aria-label': 'This race', class: 'subnav' }, h('ul', {},
    links.map(([key, href, label]) => h('li', {}, h('a', { href, 'aria-current': key === current ? 'page' : null, 'data-testid': `tab-${key}` }, label)))));
}

export async function racePage(api, raceId) {
  const path = `/races/${encodeURIComponent(raceId)}`;
  let [race, win] = await Promise.all([api.get(path), api.get(`${path}/window`)]);
  const box = alertBox('race-alert');
  const note = savedNote('race-saved');
  const status = h('p', { 'data-testid': 'race-status' });
  const title = h('h1', {}, race.name);

  // One line of facts; the window's sentence below is the live part (a polite status).
  function summary() {
    const [cls, label] = stateOf(race, race.events, win);
    status.replaceChildren(
      'State: ', h('span', { class: `state ${cls}`, 'data-testid': 'race-state' }, label),
      ' · ', h('span', { 'data-testid': 'race-listing' }, LISTING_LABEL[race.listing] || race.listing),
      ` · times in ${race.timeZone} · version ${race.version}`,
    );
    renderWindow();
    renderListing();
  }

  // The fields the director changed since the version the form shows (times compared as instants).
  function dirty() {
    const typed = readRace(form);
    const same = (k, v) => (k.endsWith('At') ? new Date(v).getTime() === new Date(race[k]).getTime() : JSON.stringify(v) === JSON.stringify(race[k]));
    return Object.fromEntries(Object.entries(typed).filter(([k, v]) => !same(k, v)));
  }

  // Show `from` in the form (except the fields in `keep`); its times in the zone the form then has.
  function fill(from, keep = {}) {
    const keys = Object.keys(readRace(form));
    for (const k of keys) {
      if (!(k in keep) && !TIME_FIELDS.includes(k)) form.elements[k].value = from[k] ?? '';
    }
    const zone = formZone(form);
    for (const k of TIME_FIELDS) {
      if (k in keep) form.elements[k].value = toZoneInput(keep[k], zone);
      else form.elements[k].value = toZoneInput(from[k], zone);
      const hint = form.querySelector(`#${form.elements[k].id}-hint`);
      if (hint) hint.textContent = `${zoneHint(zone)}${k === 'registrationClosesAt' ? ' By the race date.' : ''}`;
    }
    form.dataset.zone = zone;
  }

  // A 409 on a save: keep what the director typed, show the latest version of every other
  // field, and edit on top of that version, so saving again applies the typed changes over it.
  async function changedMeanwhile(typed) {
    const latest = await api.get(path);
    const theirs = Object.keys(readRace(form)).filter((k) => JSON.stringify(latest[k]) !== JSON.stringify(race[k]));
    setRace(latest);
    fill(latest, typed);
    say(box, `This race was changed meanwhile (now version ${latest.version})${theirs.length ? `: ${theirs.join(', ')} changed` : ''}. ` +
      'What you typed is kept; check it, then save again to apply it over the latest version.');
    box.focus();
  }

  function setRace(r) {
    const zoneMoved = r.timeZone !== race.timeZone;
    race = r;
    title.textContent = race.name;
    summary();
    if (zoneMoved) renderEvents(); // the events' price changes are shown in the race's zone
    policy.raceChanged(); // its fee is in the race's currency, its days by the race date
  }

  const save = h('button', { type: 'submit', class: 'primary', 'data-testid': 'save-race' }, 'Save changes');
  const form = h('form', { noValidate: true, 'data-testid': 'race-form' }, ...raceFields(race), h('div', { class: 'actions' }, save));
  followZone(form);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitting(save, async () => {
      say(box, '');
      showFieldErrors(form, null);
      const changes = dirty();
      note.clear();
      try {
        const saved = await api.patch(path, { expectedVersion: race.version, ...changes });
        setRace(saved);
        fill(saved);
        note.say('Saved.');
      } catch (err) {
        if (err.status === 409 && err.code === 'CONFLICT') return changedMeanwhile(changes);
        const first = showFieldErrors(form, err.fields);
        // A race date moved before a refund tier: the tier's error shows beside the tier too.
        const elsewhere = policy.showErrors(err.fields);
        const rest = Object.fromEntries(Object.entries(err.fields || {}).filter(([k]) => !elsewhere.has(k)));
        say(box, [err.message, ...unplaced(form, rest), ...[...elsewhere].map((k) => `${policyLabel(k)}: ${err.fields[k]}`)].join(' '));
        (first || box).focus();
      }
    });
  });

  // Publishing checks the race is complete: 409 RACE_INCOMPLETE names what is missing, by field.
  async function relistTo(listing) {
    say(box, '');
    showFieldErrors(form, null);
    try {
      const action = listing === 'DRAFT' ? 'unpublish' : 'publish';
      const body = { expectedVersion: race.version, ...(listing === 'DRAFT' ? {} : { listing }) };
      const listed = await api.post(`${path}/${action}`, body);
      win = await api.get(`${path}/window`); // what the window offers depends on the listing
      setRace(listed);
      announce({ DRAFT: 'Back to a draft: closed to runners.', UNLISTED: 'Published: open to runners by its link only.', LISTED: 'Published: runners can see the race on the race list.' }[race.listing]);
    } catch (err) {
      if (err.code === 'RACE_INCOMPLETE') {
        const first = showFieldErrors(form, err.fields);
        say(box, '');
        box.replaceChildren(
          h('p', {}, 'The race is not ready for runners yet:'),
          h('ul', { 'data-testid': 'missing' }, Object.entries(err.fields || {}).map(([k, v]) => h('li', {}, `${labelOf(k)}: ${v}`))),
        );
        box.hidden = false;
        return (first || box).focus();
      }
      if (err.status === 409 && err.code === 'CONFLICT' && /version/.test(err.message)) return changedMeanwhile(dirty());
      say(box, err.message);
      box.focus();
    }
  }
  function labelOf(field) {
    const label = form.querySelector(`[data-field="${CSS.escape(field)}"] label`);
    if (label) return label.textContent;
    const ev = /^events\.(\d+)\./.exec(field);
    return ev ? race.events[Number(ev[1])]?.name || field : field === 'events' ? 'Events' : field;
  }
  // -- the registration window, as the API has it -------------------------------------------
  const winWords = h('p', { role: 'status', 'aria-live': 'polite', 'data-testid': 'window-state' });
  const winFlow = h('p', { class: 'hint', 'data-testid': 'window-workflow' });
  const winHint = h('p', { class: 'hint', 'data-testid': 'window-hint' });
  const windowButtons = [['schedule', 'Schedule the window'], ['open', 'Open registration now'], ['close', 'Close registration now']].map(([action, label]) =>
    h('button', { type: 'button', 'data-testid': `window-${action}`, dataset: { action }, onClick: (e) => submitting(e.currentTarget, async () => {
      say(box, '');
      try {
        win = await api.post(`${path}/window/${action}`);
        setRace(await api.get(path)); // its registrationState and version moved with the window
      } catch (err) {
        say(box, err.message);
        box.focus();
      }
    }).finally(renderWindow) }, label));

  function renderWindow() {
    const words = windowWords(race, win);
    if (winWords.textContent !== words) winWords.textContent = words; // unchanged: not read again
    winFlow.textContent = workflowWords(race, win);
    for (const b of windowButtons) b.disabled = !win.actions.includes(b.dataset.action);
    const over = new Date(race.registrationClosesAt).getTime() <= Date.now();
    winHint.textContent = !race.published && !win.actions.length
      ? 'A draft is closed to runners: publish it (below) to schedule or open registration.'
      : over && !win.actions.length ? 'The closing time has passed: set a later one in the settings to schedule or open registration again.' : '';
    winHint.hidden = !winHint.textContent;
  }

  // Read again while the page is shown: at the window's next time, or every half minute
  // (another tab, director or the workflow itself may change it). A page left stops it.
  const shownAt = location.hash;
  let poll = 0;
  function pollLater() {
    clearTimeout(poll);
    poll = setTimeout(async () => {
      if (location.hash !== shownAt || !title.isConnected) return;
      if (!document.hidden) {
        try {
          const was = win;
          win = await api.get(`${path}/window`);
          if (win.registrationState !== was.registrationState || win.registrationState !== race.registrationState) {
            setRace(await api.get(path)); // the workflow changed the race: a save must name its new version
          } else {
            summary();
          }
        } catch (err) {
          if (err.name === 'AbortError' || err.status === 401) return; // left the page, or signed out
        }
      }
      pollLater();
    }, pollDelay(win));
  }

  // -- who can see it: one control for draft / unlisted / listed, and the public pages ---------
  const listingName = `listing-${raceId}`;
  const choices = [['DRAFT', 'Draft: closed to runners'], ['UNLISTED', 'Unlisted: open by its link only'], ['LISTED', 'Listed: also on the race list']].map(([value, label]) => {
    const radio = h('input', { type: 'radio', name: listingName, id: `listing-${value}`, value, 'data-testid': `listing-${value.toLowerCase()}` });
    return h('div', { class: 'field check' }, radio, h('label', { htmlFor: radio.id }, label));
  });
  const radios = choices.map((c) => c.querySelector('input'));
  const applyListing = h('button', { type: 'button', 'data-testid': 'listing-apply', onClick: () => submitting(applyListing, () => relistTo(radios.find((r) => r.checked).value)).finally(renderListing) }, 'Change who can see it');
  for (const r of radios) r.addEventListener('change', () => (applyListing.disabled = r.value === race.listing));
  const links = h('ul', { class: 'links', 'data-testid': 'public-links' });
  function renderListing() {
    for (const r of radios) r.checked = r.value === race.listing;
    applyListing.disabled = true;
    const { race: page, results } = publicLinks(race);
    const later = race.published ? '' : ' (runners see it once the race is published)';
    links.replaceChildren(
      h('li', {}, 'Race page: ', h('a', { href: page, 'data-testid': 'race-link' }, page), later),
      ...results.map(([name, url]) => h('li', {}, `Results, ${name}: `, h('a', { href: url, 'data-testid': 'results-link' }, url))),
    );
  }

  const policy = policySection(api, path, () => race, setRace);
  const policyLabel = (field) => policy.querySelector(`[data-field="${CSS.escape(field)}"] label`)?.textContent || field;

  const events = h('div', { 'data-testid': 'events' });
  function renderEvents() {
    events.replaceChildren(...race.events.map((ev) => eventEditor(api, path, ev, () => race, setRace)));
  }
  const addEvent = newEventForm(api, path, () => race, (r) => {
    race = r;
    summary();
    renderEvents();
  });

  summary();
  renderEvents();
  show(
    h('p', {}, h('a', { href: '#/races' }, '← Your races')),
    title,
    status,
    box,
    h('section', { class: 'window-panel', 'aria-labelledby': 'window-heading', 'data-testid': 'window-section' },
      h('h2', { id: 'window-heading' }, 'Registration window'),
      winWords, winFlow, h('div', { class: 'row' }, ...windowButtons), winHint),
    h('section', { class: 'listing-panel', 'aria-labelledby': 'listing-heading', 'data-testid': 'listing-section' },
      h('h2', { id: 'listing-heading' }, 'Who can see it'),
      h('fieldset', {}, h('legend', { class: 'visually-hidden' }, 'Who can see the race'), ...choices),
      h('div', { class: 'row' }, applyListing),
      links),
    subnav(raceId, 'settings'),
    h('h2', {}, 'Settings'),
    form,
    note,
    policy,
    h('h2', {}, 'Events'),
    events,
    h('h3', {}, 'Add an event'),
    addEvent,
    copySection(api, path, race),
    await fairnessSection(api, raceId),
  );
  pollLater();
}

// -- one event: its place count, price, price changes by date and age rule ---------------------
let editors = 0;

function eventEditor(api, path, ev, current, updated) {
  const n = ++editors;
  const zone = () => current().timeZone;
  const currency = () => current().currency;
  const box = h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': 'event-alert' });
  const note = savedNote('event-saved');
  function field(key, label, attrs = {}, hint) {
    const id = `ev${n}-${key.replace(/\./g, '-')}`;
    const control = h('input', { id, ...attrs });
    const error = h('p', { id: `${id}-error`, class: 'error', hidden: true });
    control.setAttribute('aria-describedby', `${hint ? `${id}-hint ` : ''}${id}-error`);
    const wrap = h('div', { class: 'field', dataset: { field: key } }, h('label', { htmlFor: id }, label), hint ? h('p', { id: `${id}-hint`, class: 'hint' }, hint) : null, control, error);
    wrap.control = control;
    return wrap;
  }
  const legend = h('legend', {}, ev.name);
  const name = field('name', 'Event name', { maxLength: 100, required: true });
  const cap = field('cap', 'Places (cap)', { type: 'number', min: 1 });
  const price = field('priceCents', 'Price', { inputMode: 'decimal' }, 'In the race currency; the price until the first price change below.');
  const minAge = field('minAge', 'Minimum age on race day', { type: 'number', min: 0, max: 120 });
  const maxAge = field('maxAge', 'Maximum age on race day', { type: 'number', min: 0, max: 120 });
  const noMax = h('input', { id: `ev${n}-noMaxAge`, type: 'checkbox' });
  const noMaxWrap = h('div', { class: 'field check', dataset: { field: 'noMaxAge' } }, noMax, h('label', { htmlFor: noMax.id }, 'No maximum age'), h('p', { class: 'error', hidden: true }));
  noMax.addEventListener('change', () => {
    maxAge.control.disabled = noMax.checked;
    if (noMax.checked) maxAge.control.value = '';
  });
  // The event's waitlist (issue 40): runners join it once the event is sold out.
  const waitOn = h('input', { id: `ev${n}-waitlist-enabled`, type: 'checkbox', 'data-testid': 'waitlist-enabled' });
  const waitOnWrap = h('div', { class: 'field check', dataset: { field: 'waitlist.enabled' } }, waitOn,
    h('label', { htmlFor: waitOn.id }, 'A waitlist once sold out'), h('p', { class: 'error', hidden: true }));
  // Team entries (racecap.teams): a captain holds and pays for min..max places together.
  const teamsOn = h('input', { id: `ev${n}-teams`, type: 'checkbox', 'data-testid': 'teams-enabled' });
  const teamsOnWrap = h('div', { class: 'field check', dataset: { field: 'noTeams' } }, teamsOn,
    h('label', { htmlFor: teamsOn.id }, 'Team entries (a captain enters and pays for the team)'), h('p', { class: 'error', hidden: true }));
  const teamMin = field('teamMinSize', 'Smallest team', { type: 'number', min: 2, max: 25 });
  const teamMax = field('teamMaxSize', 'Largest team', { type: 'number', min: 2, max: 25 }, 'At most 25.');
  const syncTeams = () => {
    teamMin.control.disabled = teamMax.control.disabled = !teamsOn.checked;
  };
  teamsOn.addEventListener('change', syncTeams);
  const offerHours = field('waitlist.offerWindowHours', 'Hours to take an offered place', { type: 'number', min: 1, max: 336 });
  const maxLength = field('waitlist.maxLength', 'Most runners on the list', { type: 'number', min: 1 }, 'Leave empty for no limit.');
  const taken = h('p', { 'data-testid': 'event-taken' });
  const tiers = h('div', { class: 'tiers', 'data-testid': 'tiers' });
  const tierHint = h('p', { class: 'hint' });

  // Tier rows are rebuilt from what is typed on every add or remove, so numbering and labels
  // stay in order ("Price change 2 starts") and nothing typed is lost.
  function tierRows(values) {
    tiers.replaceChildren(...values.map((t, i) => {
      const starts = field(`priceTiers.${i}.startsAt`, `Price change ${i + 1} starts`, { type: 'datetime-local', value: t.startsAt });
      const amount = field(`priceTiers.${i}.priceCents`, `Price change ${i + 1} price`, { inputMode: 'decimal', value: t.price });
      const remove = h('button', { type: 'button', 'data-testid': 'remove-tier', 'aria-label': `Remove price change ${i + 1}`, onClick: () => {
        const now = typedTiers();
        now.splice(i, 1);
        tierRows(now);
        (tiers.querySelector('input') || addTier).focus();
      } }, 'Remove');
      return h('div', { class: 'tier', 'data-testid': 'tier-row' }, starts, amount, remove);
    }));
    tierHint.textContent = values.length ? `Times in ${zone()}.` : 'No price changes: the price above holds throughout.';
  }
  function typedTiers() {
    return [...tiers.querySelectorAll('[data-testid="tier-row"]')].map((row) => {
      const [s, p] = row.querySelectorAll('input');
      return { startsAt: s.value, price: p.value };
    });
  }
  const addTier = h('button', { type: 'button', 'data-testid': 'add-tier', onClick: () => {
    const now = typedTiers();
    now.push({ startsAt: '', price: '' });
    tierRows(now);
    tiers.lastElementChild.querySelector('input').focus();
  } }, 'Add a price change');

  function load(e) {
    ev = e;
    legend.textContent = e.name;
    name.control.value = e.name;
    cap.control.value = e.cap;
    price.control.value = inputFromMinor(e.priceCents, currency());
    minAge.control.value = e.minAge;
    noMax.checked = e.maxAge === null || e.maxAge === undefined;
    maxAge.control.value = noMax.checked ? '' : e.maxAge;
    maxAge.control.disabled = noMax.checked;
    taken.textContent = `Taken: ${e.taken} of ${e.cap} · price now ${money(e.priceNow ?? e.priceCents, currency())}`;
    tierRows(e.priceTiers.map((t) => ({ startsAt: toZoneInput(t.startsAt, zone()), price: inputFromMinor(t.priceCents, currency()) })));
    teamsOn.checked = e.teamMinSize !== null && e.teamMinSize !== undefined;
    teamMin.control.value = e.teamMinSize ?? 2;
    teamMax.control.value = e.teamMaxSize ?? 6;
    syncTeams();
    const w = e.waitlist || { enabled: false, offerWindowHours: 48, maxLength: null };
    waitOn.checked = w.enabled;
    offerHours.control.value = w.offerWindowHours;
    maxLength.control.value = w.maxLength ?? '';
  }

  function asked() {
    const c = currency();
    const out = {
      name: name.control.value.trim(),
      cap: Number(cap.control.value),
      priceCents: amountFrom(price.control.value, c),
      minAge: Number(minAge.control.value),
    };
    if (noMax.checked) {
      if (ev.maxAge !== null && ev.maxAge !== undefined) out.noMaxAge = true;
    } else {
      out.maxAge = maxAge.control.value.trim() === '' ? null : Number(maxAge.control.value);
    }
    const typed = typedTiers().map((t) => ({ startsAt: t.startsAt ? fromZoneInput(t.startsAt, zone()) : '', priceCents: amountFrom(t.price, c) }));
    const same = typed.length === ev.priceTiers.length &&
      typed.every((t, i) => t.priceCents === ev.priceTiers[i].priceCents && new Date(t.startsAt).getTime() === new Date(ev.priceTiers[i].startsAt).getTime());
    if (!same) out.priceTiers = typed;
    const hadTeams = ev.teamMinSize !== null && ev.teamMinSize !== undefined;
    if (teamsOn.checked) {
      const low = Number(teamMin.control.value);
      const high = Number(teamMax.control.value);
      if (!hadTeams || low !== ev.teamMinSize || high !== ev.teamMaxSize) Object.assign(out, { teamMinSize: low, teamMaxSize: high });
    } else if (hadTeams) {
      out.noTeams = true;
    }
    // The setting is sent whole (it replaces the one before), and only when it changed.
    const waitlist = { enabled: waitOn.checked, offerWindowHours: Number(offerHours.control.value),
      ...(maxLength.control.value.trim() ? { maxLength: Number(maxLength.control.value) } : {}) };
    const was = ev.waitlist || { enabled: false, offerWindowHours: 48, maxLength: null };
    if (waitlist.enabled !== was.enabled || waitlist.offerWindowHours !== was.offerWindowHours
      || (waitlist.maxLength ?? null) !== was.maxLength) out.waitlist = waitlist;
    return Object.fromEntries(Object.entries(out).filter(([k, v]) => ['noMaxAge', 'priceTiers', 'waitlist', 'teamMinSize', 'teamMaxSize', 'noTeams'].includes(k) || v !== ev[k]));
  }

  const save = h('button', { type: 'submit', 'data-testid': 'save-event' }, 'Save this event');
  const el = h('form', { noValidate: true, class: 'event-editor', 'data-testid': 'event-row', dataset: { eventId: ev.eventId } },
    h('fieldset', { class: 'event' }, legend, box, taken,
      h('div', { class: 'grid' }, name, cap, price),
      h('fieldset', { class: 'sub' }, h('legend', {}, 'Age rule, on race day'), h('div', { class: 'grid' }, minAge, maxAge), noMaxWrap),
      h('fieldset', { class: 'sub' }, h('legend', {}, 'Price changes by date'), tierHint, tiers, addTier),
      h('fieldset', { class: 'sub', 'data-testid': 'event-teams' }, h('legend', {}, 'Teams'), teamsOnWrap, h('div', { class: 'grid' }, teamMin, teamMax)),
      h('fieldset', { class: 'sub', 'data-testid': 'event-waitlist' }, h('legend', {}, 'Waitlist'), waitOnWrap, h('div', { class: 'grid' }, offerHours, maxLength)),
      h('div', { class: 'actions' }, save), note));
  el.addEventListener('submit', (e) => {
    e.preventDefault();
    submitting(save, async () => {
      say(box, '');
      note.clear();
      showFieldErrors(el, null);
      const changes = asked();
      if ('maxAge' in changes && changes.maxAge === null) {
        showFieldErrors(el, { maxAge: 'Give a maximum age, or tick "No maximum age".' });
        return maxAge.control.focus();
      }
      try {
        const r = await api.patch(`${path}/events/${encodeURIComponent(ev.eventId)}`, { expectedVersion: current().version, ...changes });
        load(r.events.find((x) => x.eventId === ev.eventId));
        updated(r);
        note.say(`${ev.name}: saved.`);
      } catch (err) {
        if (err.status === 409 && err.code === 'CONFLICT') {
          updated(await api.get(path));
          say(box, 'The race was changed meanwhile; what you typed is kept: save again to apply it.');
          return box.focus();
        }
        const first = showFieldErrors(el, err.fields);
        say(box, [err.message, ...unplaced(el, err.fields)].join(' '));
        (first || box).focus();
      }
    });
  });
  load(ev);
  return el;
}

function newEventForm(api, path, current, updated) {
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
    f.querySelector('.error').id = `${control.id}-error`;
    const hint = f.querySelector('.hint');
    if (hint) hint.id = `${control.id}-hint`;
    control.setAttribute('aria-describedby', `${hint ? `${control.id}-hint ` : ''}${control.id}-error`);
  }
  const form = h('form', { noValidate: true, 'data-testid': 'event-form' }, box, ...fields, save);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitting(save, async () => {
      say(box, '');
      showFieldErrors(form, null);
      const v = (n) => form.elements[n].value;
      try {
        const r = await api.post(`${path}/events`, { name: v('name').trim(), cap: Number(v('cap')) || 0, priceCents: amountFrom(v('priceCents'), current().currency) });
        form.reset();
        updated(r);
        announce('Event added.');
      } catch (err) {
        showFieldErrors(form, err.fields);
        say(box, err.message);
      }
    });
  });
  return form;
}

// -- next year's edition --------------------------------------------------------------------------
function copySection(api, path, race) {
  const box = alertBox('copy-alert');
  const date = input('raceDate', "The new edition's race date", { type: 'date' },
    'Leave empty for next year\'s edition: the same day a year later. The registration window, price changes and the refund policy\'s days move with it.');
  const name = input('name', 'Name of the copy', { maxLength: 150, placeholder: race.name }, 'Leave empty to keep the name.');
  for (const f of [date, name]) {
    const control = f.querySelector('input');
    control.id = `copy-${control.name}`;
    f.querySelector('label').htmlFor = control.id;
    f.querySelector('.error').id = `${control.id}-error`;
    f.querySelector('.hint').id = `${control.id}-hint`;
    control.setAttribute('aria-describedby', `${control.id}-hint ${control.id}-error`);
  }
  const go = h('button', { type: 'submit', 'data-testid': 'copy-race' }, 'Copy as a new draft');
  const form = h('form', { noValidate: true, 'data-testid': 'copy-form' }, box, date, name, go);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitting(go, async () => {
      say(box, '');
      showFieldErrors(form, null);
      const body = {};
      if (form.elements.raceDate.value) body.raceDate = form.elements.raceDate.value;
      if (form.elements.name.value.trim()) body.name = form.elements.name.value.trim();
      try {
        const copy = await api.post(`${path}/copy`, body);
        announce(`Copied: ${copy.name}, ${copy.raceDate}, a draft.`);
        location.hash = `#/races/${encodeURIComponent(copy.raceId)}`;
      } catch (err) {
        const first = showFieldErrors(form, err.fields);
        say(box, [err.message, ...unplaced(form, err.fields)].join(' '));
        (first || box).focus();
      }
    });
  });
  return h('section', { 'aria-labelledby': 'copy-heading' },
    h('h2', { id: 'copy-heading' }, 'Copy this race'),
    h('p', {}, "A new draft with these settings, events, places, prices, age rules and runners' own changes; no runners come along."),
    form);
}
