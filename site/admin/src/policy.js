// A race's refund policy (issue 39, "runners manage their own entry"): whether runners may
// cancel their own entry, the refund tiers by day (each a last day in the race's zone, oldest
// first, on or before the race date; after the last one nothing), a fee kept from each refund,
// the last day runners may edit their details, and handing a place to someone else (issue 41:
// the last day, the fee the new runner pays, whether a place taken over may still be refunded). The whole policy is one PATCH of the race
// (refundPolicy replaces the one before), naming the version it edited, as every race save does.
// The API counts the fees in the currency's smallest unit; the director types them in units
// ("2.50", "250" yen, "2.500" dinars), converted with the console's money helpers.
import { h, savedNote } from './dom.js';
import { decimals, inputFromMinor, minorFrom } from './zone.js';

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;
const dayFormat = new Intl.DateTimeFormat('en-GB', { timeZone: 'UTC', day: 'numeric', month: 'long', year: 'numeric' });

/** "2027-03-01" → "1 March 2027"; anything else as it is. */
export function dayInWords(day) {
  const m = DAY.exec(day || '');
  if (!m) return day || '…';
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return Number.isNaN(d.getTime()) ? day : dayFormat.format(d);
}

/** The fee in the currency's units and code: "2.50 EUR", "250 JPY", "2.500 KWD". */
export function feeInWords(feeCents, currency) {
  return Number.isInteger(feeCents) ? `${inputFromMinor(feeCents, currency)} ${currency}` : `${feeCents} ${currency}`;
}

/** The policy as a director reads it back: "Runners may cancel their own entry: 100 % until
 * 1 March 2027, 50 % until 1 May 2027, nothing after; a 2.50 EUR fee." and the edit cut-off. */
export function policyInWords(policy, currency) {
  const out = [];
  if (!policy.runnersMayCancel) {
    out.push('Runners may not cancel their own entry.');
  } else if (!policy.tiers.length) {
    out.push('Runners may cancel their own entry, with no refund.');
  } else {
    const tiers = policy.tiers.map((t) => `${t.percent === '' ? '…' : t.percent} % until ${dayInWords(t.until)}`).join(', ');
    const fee = policy.feeCents === 0 ? 'no fee' : `a ${feeInWords(policy.feeCents, currency)} fee`;
    out.push(`Runners may cancel their own entry: ${tiers}, nothing after; ${fee}.`);
  }
  out.push(policy.editUntil ? `Runners may edit their details until ${dayInWords(policy.editUntil)}.` : 'Runners may not edit their details.');
  if (!policy.transfersUntil) {
    out.push('Runners may not hand their place to someone else.');
  } else {
    const fee = policy.transferFeeCents ? `the new runner pays a ${feeInWords(policy.transferFeeCents, currency)} fee` : 'no fee';
    const refund = policy.transferredRefundable === false ? 'a place taken over is not refunded' : 'a place taken over may be refunded by the tiers';
    out.push(`Runners may hand their place to someone else until ${dayInWords(policy.transfersUntil)}; ${fee}; ${refund}.`);
  }
  out.push(policy.switchesUntil
    ? `Runners may switch to another event until ${dayInWords(policy.switchesUntil)} (a dearer one's difference paid, a cheaper one's refunded).`
    : 'Runners may not switch event.');
  if (!policy.deferralsUntil) {
    out.push('Runners may not defer to the next edition.');
  } else {
    const kept = policy.deferralFeeCents ? `you keep ${feeInWords(policy.deferralFeeCents, currency)}` : 'you keep nothing';
    out.push(`Runners may defer to the next edition until ${dayInWords(policy.deferralsUntil)}; what they paid becomes a code there, ${kept}.`);
  }
  return out.join(' ');
}

const POLICY_OFF = {
  runnersMayCancel: false, tiers: [], feeCents: 0, editUntil: null,
  transfersUntil: null, transferFeeCents: 0, transferredRefundable: true,
  switchesUntil: null, deferralsUntil: null, deferralFeeCents: 0,
};

let sections = 0;

/**
 * The "Runners' own changes" section of a race's settings. ``current()`` is the race as last
 * read or saved; ``updated(race)`` hands a saved (or re-read) race back to the page. The
 * returned element has ``raceChanged()`` (the race's currency, zone or date moved: relabel,
 * keep what is typed) and ``showErrors(fields)`` (an error of another form naming a policy
 * field, e.g. a race date moved before a tier; returns the names it placed).
 */
export function policySection(api, path, current, updated) {
  const n = ++sections;
  const id = (key) => `pol${n}-${key.replace(/\./g, '-')}`;
  const box = h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': 'policy-alert' });
  const words = h('p', { 'data-testid': 'policy-summary' });
  const note = savedNote('policy-saved');

  // A control with its label, hint and error slot; ``data-field`` is the API's field name.
  function field(key, label, attrs = {}, { hint, after, cls = 'field' } = {}) {
    const control = h('input', { id: id(key), ...attrs });
    const error = h('p', { id: `${id(key)}-error`, class: 'error', hidden: true });
    const hintEl = hint ? h('p', { id: `${id(key)}-hint`, class: 'hint' }, hint) : null;
    control.setAttribute('aria-describedby', `${hint ? `${id(key)}-hint ` : ''}${id(key)}-error`);
    const labelEl = h('label', { htmlFor: control.id }, label);
    const wrap = attrs.type === 'checkbox'
      ? h('div', { class: `${cls} check`, dataset: { field: key } }, control, labelEl, error)
      : h('div', { class: cls, dataset: { field: key } }, labelEl, hintEl, control, after || null, error);
    wrap.control = control;
    wrap.hintEl = hintEl;
    return wrap;
  }

  const mayCancel = field('refundPolicy.runnersMayCancel', 'Runners may cancel their own entry', { type: 'checkbox' });
  const fee = field('refundPolicy.feeCents', '', { inputMode: 'decimal', autocomplete: 'off' }, { hint: ' ' });
  const feeLabel = fee.querySelector('label');
  const editUntil = field('refundPolicy.editUntil', 'Runners may edit their details until', { type: 'date' }, { hint: ' ' });
  // Handing a place over: none without a last day; the fee is the new runner's to pay.
  const transfersUntil = field('refundPolicy.transfersUntil', 'Runners may hand their place to someone else until', { type: 'date' }, { hint: ' ' });
  const transferFee = field('refundPolicy.transferFeeCents', '', { inputMode: 'decimal', autocomplete: 'off' }, { hint: ' ' });
  const transferFeeLabel = transferFee.querySelector('label');
  const switchesUntil = field('refundPolicy.switchesUntil', 'Runners may switch to another event until', { type: 'date' }, { hint: ' ' });
  const deferralsUntil = field('refundPolicy.deferralsUntil', 'Runners may defer to the next edition until', { type: 'date' }, { hint: ' ' });
  const deferralFee = field('refundPolicy.deferralFeeCents', '', { inputMode: 'decimal', autocomplete: 'off' }, { hint: ' ' });
  const deferralFeeLabel = deferralFee.querySelector('label');
  const transferredRefundable = field('refundPolicy.transferredRefundable', 'A place taken over may still be refunded by the tiers', { type: 'checkbox' });
  const tiers = h('div', { class: 'refund-tiers', 'data-testid': 'policy-tiers' });
  const tiersHint = h('p', { class: 'hint', id: id('tiers-hint') });
  // Errors about the tiers as a whole ("Tiers go by increasing day, one tier per day.").
  const tiersError = h('p', { class: 'error', id: id('refundPolicy-tiers-error'), hidden: true, 'data-testid': 'policy-tiers-error' });
  const tiersWrap = h('div', { dataset: { field: 'refundPolicy.tiers' } }, tiersError);

  // Rows are rebuilt from what is typed on every add or remove, so their numbering and labels
  // stay in order ("Tier 2 until") and nothing typed is lost.
  function tierRows(values) {
    tiers.replaceChildren(...values.map((t, i) => {
      const label = (text, suffix = '') => [h('span', { class: 'visually-hidden' }, `Tier ${i + 1} `), text, suffix ? h('span', { class: 'visually-hidden' }, suffix) : null];
      const until = field(`refundPolicy.tiers.${i}.until`, label('until'), { type: 'date', value: t.until }, { cls: 'field inline' });
      const percent = field(`refundPolicy.tiers.${i}.percent`, label('refund', ' percent'),
        { type: 'number', min: 0, max: 100, step: 1, inputMode: 'numeric', value: t.percent, class: 'percent' },
        { cls: 'field inline', after: h('span', { 'aria-hidden': 'true', class: 'unit' }, '%') });
      const remove = h('button', { type: 'button', 'data-testid': 'remove-policy-tier', 'aria-label': `Remove tier ${i + 1}`, onClick: () => {
        const now = typedTiers();
        now.splice(i, 1);
        tierRows(now);
        (tiers.querySelectorAll('input')[2 * Math.min(i, now.length - 1)] || addTier).focus();
        refreshWords();
      } }, 'Remove');
      return h('div', { class: 'refund-tier', 'data-testid': 'policy-tier-row' }, until, percent, remove);
    }));
    tiersHint.textContent = values.length
      ? `Each tier runs to the end of its day in the race's time zone; oldest first, by the race date. After the last tier a cancelling runner gets nothing back.`
      : 'No tiers: a runner who cancels gets nothing back.';
  }
  function typedTiers() {
    return [...tiers.querySelectorAll('[data-testid="policy-tier-row"]')].map((row) => {
      const [u, p] = row.querySelectorAll('input');
      return { until: u.value, percent: p.value };
    });
  }
  const addTier = h('button', { type: 'button', 'data-testid': 'add-policy-tier', onClick: () => {
    const now = typedTiers();
    now.push({ until: '', percent: '' });
    tierRows(now);
    tiers.lastElementChild.querySelector('input').focus();
    refreshWords();
  } }, 'Add a refund tier');

  // What is typed, as the API takes it. A wrong amount or percentage is sent as typed, so that
  // the API's own field error names it (not as 0: 0 % and no fee are choices).
  function typed() {
    const currency = current().currency;
    const feeText = fee.control.value.trim();
    const feeMinor = feeText === '' ? 0 : minorFrom(feeText, currency);
    const transferText = transferFee.control.value.trim();
    const transferMinor = transferText === '' ? 0 : minorFrom(transferText, currency);
    const deferralText = deferralFee.control.value.trim();
    const deferralMinor = deferralText === '' ? 0 : minorFrom(deferralText, currency);
    return {
      runnersMayCancel: mayCancel.control.checked,
      tiers: typedTiers().map((t) => ({ until: t.until, percent: /^\d+$/.test(t.percent.trim()) ? Number(t.percent) : t.percent.trim() })),
      feeCents: Number.isNaN(feeMinor) ? feeText : feeMinor,
      editUntil: editUntil.control.value || null,
      transfersUntil: transfersUntil.control.value || null,
      transferFeeCents: Number.isNaN(transferMinor) ? transferText : transferMinor,
      transferredRefundable: transferredRefundable.control.checked,
      switchesUntil: switchesUntil.control.value || null,
      deferralsUntil: deferralsUntil.control.value || null,
      deferralFeeCents: Number.isNaN(deferralMinor) ? deferralText : deferralMinor,
    };
  }

  function refreshWords() {
    words.textContent = policyInWords(typed(), current().currency);
  }

  // The race's currency, zone or date: labels and hints follow; what is typed stays.
  function relabel() {
    const race = current();
    const example = inputFromMinor(250 * 10 ** Math.max(0, decimals(race.currency) - 2), race.currency);
    feeLabel.textContent = `Fee kept from each refund (${race.currency})`;
    fee.hintEl.textContent = `In ${race.currency}, e.g. ${example}; leave empty or 0 for no fee.`;
    editUntil.hintEl.textContent = `A day in the race's time zone (${race.timeZone}), by the race date (${dayInWords(race.raceDate)}). Leave empty: runners may not edit their details.`;
    transfersUntil.hintEl.textContent = `A day in the race's time zone (${race.timeZone}), by the race date. Leave empty: runners may not hand their place over.`;
    transferFeeLabel.textContent = `Transfer fee the new runner pays (${race.currency})`;
    transferFee.hintEl.textContent = `In ${race.currency}, e.g. ${example}; leave empty or 0 for no fee. The payment provider charges no less than its minimum.`;
    transfersUntil.control.max = race.raceDate;
    switchesUntil.hintEl.textContent = `A day in the race's time zone (${race.timeZone}). Leave empty: runners may not switch event.`;
    deferralsUntil.hintEl.textContent = 'Needs a next edition (copy the race). Leave empty: runners may not defer.';
    deferralFeeLabel.textContent = `Kept from a deferring runner's credit (${race.currency})`;
    deferralFee.hintEl.textContent = `In ${race.currency}; leave empty or 0 to carry all they paid over.`;
    switchesUntil.control.max = deferralsUntil.control.max = race.raceDate;
    for (const input of tiers.querySelectorAll('input[type=date]')) input.max = race.raceDate;
    editUntil.control.max = race.raceDate;
  }

  function load(policy = POLICY_OFF) {
    const currency = current().currency;
    mayCancel.control.checked = Boolean(policy.runnersMayCancel);
    tierRows((policy.tiers || []).map((t) => ({ until: t.until, percent: String(t.percent) })));
    fee.control.value = policy.feeCents ? inputFromMinor(policy.feeCents, currency) : '';
    editUntil.control.value = policy.editUntil || '';
    transfersUntil.control.value = policy.transfersUntil || '';
    transferFee.control.value = policy.transferFeeCents ? inputFromMinor(policy.transferFeeCents, currency) : '';
    transferredRefundable.control.checked = policy.transferredRefundable !== false;
    switchesUntil.control.value = policy.switchesUntil || '';
    deferralsUntil.control.value = policy.deferralsUntil || '';
    deferralFee.control.value = policy.deferralFeeCents ? inputFromMinor(policy.deferralFeeCents, currency) : '';
    relabel();
    refreshWords();
  }

  // Field errors go beside their control; returns the names placed and the first control.
  function placeErrors(fields) {
    const placed = new Set();
    let first = null;
    for (const wrap of el.querySelectorAll('[data-field]')) {
      const message = fields?.[wrap.dataset.field] || '';
      const error = wrap.querySelector(':scope > .error');
      error.textContent = message;
      error.hidden = !message;
      const control = wrap.control;
      if (control) control.setAttribute('aria-invalid', message ? 'true' : 'false');
      if (message) {
        placed.add(wrap.dataset.field);
        if (!first) first = control || wrap.closest('fieldset').querySelector('input') || addTier;
      }
    }
    return { placed, first };
  }

  const save = h('button', { type: 'submit', class: 'primary', 'data-testid': 'save-policy' }, "Save runners' changes");
  const form = h('form', { noValidate: true, 'data-testid': 'policy-form', class: 'policy-form' },
    box,
    mayCancel,
    h('fieldset', { class: 'sub' }, h('legend', {}, 'Refund when a runner cancels'), tiersHint, tiers, tiersWrap, addTier),
    h('div', { class: 'grid' }, fee, editUntil),
    h('fieldset', { class: 'sub', 'data-testid': 'policy-transfers' }, h('legend', {}, 'Handing a place to someone else'),
      h('div', { class: 'grid' }, transfersUntil, transferFee), transferredRefundable),
    h('fieldset', { class: 'sub', 'data-testid': 'policy-moves' }, h('legend', {}, 'Switching event, deferring to next year'),
      h('div', { class: 'grid' }, switchesUntil, deferralsUntil, deferralFee)),
    h('div', { class: 'actions' }, save), note);
  form.addEventListener('input', refreshWords);
  form.addEventListener('change', refreshWords);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (save.disabled) return;
    save.disabled = true;
    (async () => {
      say('');
      note.clear();
      placeErrors(null);
      try {
        const saved = await api.patch(path, { expectedVersion: current().version, refundPolicy: typed() });
        updated(saved);
        load(saved.refundPolicy);
        note.say("Runners' changes saved.");
      } catch (err) {
        if (err.status === 409 && err.code === 'CONFLICT') {
          updated(await api.get(path));
          say('The race was changed meanwhile; what you typed is kept: save again to apply it over the latest version.');
          return box.focus();
        }
        const { placed, first } = placeErrors(err.fields);
        const rest = Object.entries(err.fields || {}).filter(([k]) => !placed.has(k)).map(([k, v]) => `${k === 'body' ? '' : `${k}: `}${v}`);
        say([err.message, ...rest].join(' '));
        (first || box).focus();
      } finally {
        save.disabled = false;
      }
    })();
  });

  function say(message, cls = 'alert') {
    box.className = cls;
    box.textContent = message || '';
    box.hidden = !message;
  }

  const el = h('section', { 'aria-labelledby': id('heading'), class: 'policy', 'data-testid': 'policy-section' },
    h('h2', { id: id('heading') }, "Runners' own changes"),
    h('p', {}, 'What runners may do with their own entry, without asking you: cancel it (refunded by the tiers, less the fee), edit their details and hand their place to someone else.'),
    h('div', { class: 'policy-layout' },
      form,
      h('aside', { class: 'policy-words', 'aria-labelledby': id('words-heading') },
        h('h3', { id: id('words-heading') }, 'In words'),
        words)));
  el.raceChanged = () => {
    relabel();
    refreshWords();
  };
  el.showErrors = (fields) => {
    const { placed } = placeErrors(fields);
    return placed;
  };
  load(current().refundPolicy);
  return el;
}

