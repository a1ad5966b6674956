// A race's discount codes: the list with each code's uses against its limit, a form for one
// code, and a sponsor's batch of single-use codes whose CSV the browser downloads. Times are
// typed and shown in the race's own time zone (zone.js); amounts in the currency's units.
import { announce, h, show } from './dom.js';
import { fromZoneInput, minorFrom, money, showInZone } from './zone.js';

const enc = encodeURIComponent;

// A labelled control with its error slot; `name` is the API's field, so its errors land here.
function control(prefix, name, label, attrs = {}, hint) {
  const id = `${prefix}-${name}`;
  const el = attrs.options
    ? h('select', { id, name }, attrs.options.map(([value, text]) => h('option', { value }, text)))
    : h('input', { id, name, ...attrs });
  const error = h('p', { id: `${id}-error`, class: 'error', hidden: true, 'data-testid': `${id}-error` });
  el.setAttribute('aria-describedby', `${hint ? `${id}-hint ` : ''}${id}-error`);
  return h('div', { class: 'field', dataset: { field: name } }, h('label', { htmlFor: id }, label),
    hint ? h('p', { id: `${id}-hint`, class: 'hint' }, hint) : null, el, error);
}

const valueOf = (root, name) => root.querySelector(`[data-field="${name}"] input, [data-field="${name}"] select`)?.value.trim() ?? '';

// The API's field errors on their fields (the value field answers for percent and amountCents;
// a check across fields, named "body", goes to the field it is about); the rest to the alert.
function showErrors(root, box, err) {
  const fields = { ...(err?.fields || {}) };
  for (const k of ['percent', 'amountCents']) if (fields[k]) fields.value = fields[k];
  if (fields.body && /validTo/.test(fields.body)) fields.validTo = fields.body;
  let first = null;
  for (const wrap of root.querySelectorAll('[data-field]')) {
    const message = fields[wrap.dataset.field] || '';
    const error = wrap.querySelector('.error');
    const el = wrap.querySelector('input, select');
    error.textContent = message;
    error.hidden = !message;
    el?.setAttribute('aria-invalid', message ? 'true' : 'false');
    if (message && !first) first = el;
  }
  if (!err) return;
  box.className = 'alert';
  box.textContent = err.message;
  box.hidden = false;
  (first || box).focus();
}

function done(root, box, message) {
  showErrors(root, box, null);
  box.className = 'note';
  box.textContent = message;
  box.hidden = false;
  announce(message);
  root.reset();
}

// What a code gives, where and when: the same fields for one code and for a batch.
function termsFields(prefix, race) {
  const currency = race.currency || race.events[0]?.currency || 'USD';
  const kind = control(prefix, 'kind', 'Discount', { options: [['PERCENT', 'A percentage off'], ['AMOUNT', `An amount off (${currency})`]] });
  const value = control(prefix, 'value', 'Percent off', { inputmode: 'decimal', required: true }, 'For a percentage: 1 to 100 (100 makes the entry free).');
  const valueLabel = value.querySelector('label');
  kind.querySelector('select').addEventListener('change', (e) => {
    valueLabel.textContent = e.target.value === 'PERCENT' ? 'Percent off' : `Amount off (${currency})`;
  });
  const events = h('fieldset', { class: 'sub', dataset: { field: 'eventIds' } }, h('legend', {}, 'Valid for (none ticked: every event)'),
    race.events.map((e) => h('div', { class: 'field check' },
      h('input', { type: 'checkbox', id: `${prefix}-ev-${e.eventId}`, value: e.eventId }),
      h('label', { htmlFor: `${prefix}-ev-${e.eventId}` }, e.name))),
    h('p', { class: 'error', hidden: true, id: `${prefix}-eventIds-error` }));
  const zone = `In the race's time zone, ${race.timeZone}; empty: no limit.`;
  const from = control(prefix, 'validFrom', 'Valid from', { type: 'datetime-local' }, zone);
  const to = control(prefix, 'validTo', 'Valid until', { type: 'datetime-local' }, zone);
  const note = control(prefix, 'note', 'Note (who it is for)', { maxlength: 200 });
  // A ballot event's places are drawn, but for those it keeps: a guaranteed entry holds one of those.
  const sure = h('div', { class: 'field check', dataset: { field: 'guaranteed' } },
    h('input', { type: 'checkbox', id: `${prefix}-guaranteed`, 'aria-describedby': `${prefix}-guaranteed-hint` }),
    h('label', { htmlFor: `${prefix}-guaranteed` }, 'Guaranteed entry (charity, qualifier, deferral)'),
    h('p', { id: `${prefix}-guaranteed-hint`, class: 'hint' }, 'On a ballot event: holds one of the places kept out of the draw, once it is drawn.'),
    h('p', { id: `${prefix}-guaranteed-error`, class: 'error', hidden: true }));
  const read = (root) => {
    const k = valueOf(root, 'kind');
    const typed = valueOf(root, 'value');
    const body = { kind: k, eventIds: [...events.querySelectorAll('input:checked')].map((c) => c.value) };
    if (k === 'PERCENT') body.percent = /^\d+$/.test(typed) ? Number(typed) : typed;
    else body.amountCents = Number.isNaN(minorFrom(typed, currency)) ? typed : minorFrom(typed, currency);
    for (const name of ['validFrom', 'validTo']) {
      const v = valueOf(root, name);
      if (v) body[name] = fromZoneInput(v, race.timeZone);
    }
    const n = valueOf(root, 'note');
    if (n) body.note = n;
    if (sure.querySelector('input').checked) body.guaranteed = true;
    return body;
  };
  return { nodes: [kind, value, events, from, to, note, sure], read };
}

function describe(c, race) {
  const currency = race.currency || race.events[0]?.currency || 'USD';
  const names = Object.fromEntries(race.events.map((e) => [e.eventId, e.name]));
  return {
    discount: `${c.kind === 'PERCENT' ? `${c.percent}% off` : `${money(c.amountCents, currency)} off`}${c.guaranteed ? ' · guaranteed entry' : ''}`,
    events: c.eventIds.length ? c.eventIds.map((id) => names[id] || id).join(', ') : 'Every event',
    valid: c.validFrom || c.validTo
      ? `${c.validFrom ? `from ${showInZone(c.validFrom, race.timeZone)}` : ''}${c.validFrom && c.validTo ? ' ' : ''}${c.validTo ? `until ${showInZone(c.validTo, race.timeZone)}` : ''}`
      : 'Always',
    uses: `${c.uses} / ${c.maxUses ?? 'no limit'}`,
  };
}

export async function codesPage(api, raceId, subnav) {
  const path = `/races/${enc(raceId)}`;
  const race = await api.get(path);
  const list = h('tbody', {});
  const empty = h('p', { 'data-testid': 'codes-empty', hidden: true }, 'No codes yet.');

  async function load() {
    const { codes } = await api.get(`${path}/codes`);
    list.replaceChildren(...codes.map((c) => {
      const d = describe(c, race);
      return h('tr', { 'data-testid': 'code-row' }, h('th', { scope: 'row' }, c.code), h('td', {}, d.discount),
        h('td', {}, d.events), h('td', {}, d.valid), h('td', { 'data-testid': 'code-uses' }, d.uses), h('td', {}, c.note || ''));
    }));
    empty.hidden = codes.length > 0;
  }

  // One code.
  const oneBox = h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': 'code-alert' });
  const oneTerms = termsFields('code', race);
  const oneButton = h('button', { type: 'submit', class: 'primary', 'data-testid': 'create-code' }, 'Create code');
  const one = h('form', { noValidate: true, 'data-testid': 'code-form' }, oneBox,
    control('code', 'code', 'Code', { required: true, maxlength: 40, autocomplete: 'off', spellcheck: false }, '3 to 40 letters, digits, - or _; runners may type it in any case.'),
    ...oneTerms.nodes,
    control('code', 'maxUses', 'Maximum uses', { type: 'number', min: 1 }, 'Empty: no limit.'),
    oneButton);
  one.addEventListener('submit', async (e) => {
    e.preventDefault();
    oneButton.disabled = true;
    oneBox.hidden = true;
    try {
      const body = { code: valueOf(one, 'code'), ...oneTerms.read(one) };
      const uses = valueOf(one, 'maxUses');
      if (uses) body.maxUses = /^\d+$/.test(uses) ? Number(uses) : uses;
      const made = await api.post(`${path}/codes`, body);
      done(one, oneBox, `Code ${made.code} created.`);
      await load();
    } catch (err) {
      showErrors(one, oneBox, err);
    } finally {
      oneButton.disabled = false;
    }
  });

  // A sponsor's batch: N single-use codes, the CSV downloaded at once (the token stays in a header).
  const bulkBox = h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': 'bulk-alert' });
  const bulkTerms = termsFields('bulk', race);
  const bulkButton = h('button', { type: 'submit', class: 'primary', 'data-testid': 'create-bulk' }, 'Create codes and download the CSV');
  const bulk = h('form', { noValidate: true, 'data-testid': 'bulk-form' }, bulkBox,
    control('bulk', 'count', 'How many codes', { type: 'number', min: 1, max: 1000, required: true }),
    control('bulk', 'prefix', 'Prefix', { required: true, maxlength: 16, autocomplete: 'off' }, '2 to 16 letters or digits, e.g. the sponsor: SPONSOR-7K3M9QXA.'),
    ...bulkTerms.nodes, bulkButton);
  bulk.addEventListener('submit', async (e) => {
    e.preventDefault();
    bulkButton.disabled = true;
    bulkBox.hidden = true;
    try {
      const count = valueOf(bulk, 'count');
      const body = { count: /^\d+$/.test(count) ? Number(count) : count, prefix: valueOf(bulk, 'prefix'), ...bulkTerms.read(bulk) };
      const response = await api.postForFile(`${path}/codes/bulk`, body);
      const text = await response.text();
      const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
      const a = h('a', { href: url, download: `${raceId}-${body.prefix}-codes.csv` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      done(bulk, bulkBox, `${body.count} single-use codes created; the CSV is downloaded.`);
      await load();
    } catch (err) {
      showErrors(bulk, bulkBox, err);
    } finally {
      bulkButton.disabled = false;
    }
  });

  show(
    h('p', {}, h('a', { href: '#/races' }, '← Your races')),
    h('h1', {}, `Discount codes · ${race.name}`),
    subnav(raceId, 'codes'),
    h('div', { class: 'scroll' }, h('table', { 'data-testid': 'codes' },
      h('thead', {}, h('tr', {}, ...['Code', 'Discount', 'Events', 'Valid', 'Uses / limit', 'Note'].map((t) => h('th', { scope: 'col' }, t)))), list)),
    empty,
    h('section', { 'aria-labelledby': 'code-heading' }, h('h2', { id: 'code-heading' }, 'New code'), one),
    h('section', { 'aria-labelledby': 'bulk-heading' }, h('h2', { id: 'bulk-heading' }, 'Single-use codes for a sponsor'), bulk),
  );
  await load();
}
