// The event's registration questions and waiver on the details step, as the API states them
// (GET /api/races/{raceId}/events/{eventId}/questions): every kind, keyboard only, shown when
// another answer matches. Every limit (lengths, bounds, options, the guardian's age) is the
// API's, read from the questions; the server checks again and names any field it refuses
// (`answers.<id>`, `waiver.…`), which lands under that field here. Answers live in the form's
// saved state, so a failed submit or a reload keeps everything typed.
import { api, withBusyRetry } from './api.js';
import { enc, errorBox, h } from './ui.js';
import { ageOn, normaliseDate } from './validate.js';

const TEXT_KINDS = ['SHORT_TEXT', 'LONG_TEXT'];
const countryName = (() => {
  try {
    const names = new Intl.DisplayNames([navigator.language || 'en'], { type: 'region' });
    return (code) => names.of(code) || code;
  } catch {
    return (code) => code;
  }
})();

const blank = (v) => v == null || v === '' || (Array.isArray(v) && !v.length);

// Whether `q` is asked, given the answers so far (the API's rule: yes/no equals, a choice is
// the option, a multiple choice contains it; a question hidden hides what depends on it).
export function shown(q, answers, byId) {
  if (!q.showWhen) return true;
  const other = byId[q.showWhen.questionId];
  if (other && !shown(other, answers, byId)) return false;
  const given = answers[q.showWhen.questionId];
  return Array.isArray(given) ? given.includes(q.showWhen.equals) : given === q.showWhen.equals;
}

// What the form checks before sending, from each question's own rule.
export function checkAnswer(q, v) {
  if (blank(v)) return q.required ? 'Please answer this question.' : '';
  if (TEXT_KINDS.includes(q.kind)) {
    const limit = q.maxLength || (q.kind === 'SHORT_TEXT' ? 200 : 4000);
    return String(v).trim().length > limit ? `At most ${limit} characters.` : '';
  }
  if (q.kind === 'NUMBER') {
    if (typeof v !== 'number' || Number.isNaN(v)) return 'Answer with a number.';
    if (q.wholeNumber && !Number.isInteger(v)) return 'Answer with a whole number.';
    if (q.min != null && v < q.min) return `At least ${q.min}.`;
    if (q.max != null && v > q.max) return `At most ${q.max}.`;
  }
  if (q.kind === 'DATE' && !/^\d{4}-\d{2}-\d{2}$/.test(v)) return 'Give a date as YYYY-MM-DD.';
  return '';
}

// The runner is under the API's adult age on race day (a parent or guardian accepts too).
export function needsGuardian(dateOfBirth, raceDate, adultAge) {
  const b = /^(\d{4})-(\d{2})-(\d{2})$/.exec(normaliseDate(dateOfBirth));
  const d = /^(\d{4})-(\d{2})-(\d{2})$/.exec(raceDate || '');
  return Boolean(b && d && ageOn(b.slice(1).map(Number), d.slice(1).map(Number)) < adultAge);
}

// Styles set through the CSSOM (the site's CSP allows no inline style attribute): only pages
// with questions carry them. One choice a line, big enough to tap; the waiver scrolls.
const CHOICE = 'display:flex;align-items:center;gap:.75rem;min-height:44px;font-weight:normal';
const BOX = 'width:1.5rem;height:1.5rem;margin:0;flex:none';
const LABEL = 'font-weight:bold;margin:0 0 .25rem';
const WAIVER = 'max-height:12rem;overflow:auto;white-space:pre-wrap;border:1px solid #c3ccd5;padding:.75rem';
const styled = (el, css) => {
  el.style.cssText = css;
  return el;
};

// Fetches the event's questions and mounts them after the date of birth: the form's
// controller, or null when the event asks nothing. A failed fetch offers a retry in place.
export async function attach(ctx, opts, host = h('div', { testid: 'questions' })) {
  if (!ctx.raceId || !ctx.eventId) return null;
  if (!host.isConnected) opts.fields.dateOfBirth.input.closest('.field').after(host);
  try {
    const { data } = await withBusyRetry(() => api('GET',
      `/races/${enc(ctx.raceId)}/events/${enc(ctx.eventId)}/questions`, { signal: opts.signal }), { signal: opts.signal });
    if (!data.questions.length && !data.waiver) return null;
    return mountQuestions(host, data, { ...opts, raceDate: ctx.raceDate });
  } catch (e) {
    if (opts.signal.aborted) throw e;
    return new Promise((resolve) => {
      host.replaceChildren(errorBox(`Could not load this event's questions. ${e.message}`, () => {
        host.replaceChildren();
        resolve(attach(ctx, opts, host));
      }));
    });
  }
}

// Mounts the questions in `host`. `state` is the form's saved state (answers, waiver), `save`
// persists it, `fields` is the form's field map (errors by name), `raceDate` decides the guardian.
// `prefix` names one runner of several (a team's member: "members.2."), in the fields' names and ids.
export function mountQuestions(host, set, { state, save: keep, fields, raceDate, setErr, prefix = '' }) {
  const idp = prefix.replace(/\./g, '-');
  state.answers = state.answers || {};
  state.waiver = state.waiver || {};
  const byId = Object.fromEntries(set.questions.map((q) => [q.id, q]));
  // Options with stock that none is left of, as the API read them a moment ago: offered
  // disabled and marked. The registration's claim decides (a size that sells out meanwhile is
  // a 409 naming the question, shown under it by the form).
  const gone = (q, id) => (set.soldOut?.[q.id] || []).includes(id);
  const optionText = (q, o) => (gone(q, o.id) ? `${o.label} (sold out)` : o.label);
  const blocks = {};
  const save = () => {
    delete state.pending; // edited, so the next submit is a new body
    keep();
  };

  const error = (name, id) => {
    const err = h('p', { id: `${id}-err`, cls: 'field-error', testid: `error-${name}`, hidden: true });
    return err;
  };
  const changed = () => {
    save();
    for (const q of set.questions) blocks[q.id].hidden = !shown(q, state.answers, byId);
    guardian.hidden = !(set.waiver && needsGuardian(state.dateOfBirth, raceDate, set.adultAge));
  };

  function control(q, id, describedBy) {
    const v = state.answers[q.id];
    const common = { id, name: `${prefix}answers.${q.id}`, testid: `question-${q.id}`, 'aria-describedby': describedBy };
    if (q.kind === 'LONG_TEXT') {
      const el = h('textarea', { ...common, rows: '4', maxlength: String(q.maxLength || 4000) });
      el.value = v || '';
      el.addEventListener('input', () => { state.answers[q.id] = el.value; changed(); });
      return el;
    }
    if (q.kind === 'SINGLE_CHOICE' || q.kind === 'COUNTRY') {
      const options = q.kind === 'COUNTRY'
        ? set.countries.map((c) => ({ id: c, label: countryName(c) })).sort((a, b) => a.label.localeCompare(b.label))
        : q.options;
      const el = h('select', common, h('option', { value: '' }, 'Choose…'),
        options.map((o) => h('option', { value: o.id, selected: v === o.id, disabled: gone(q, o.id) }, optionText(q, o))));
      el.addEventListener('change', () => { state.answers[q.id] = el.value || null; changed(); });
      return el;
    }
    if (q.kind === 'MULTIPLE_CHOICE' || q.kind === 'YES_NO') {
      // A group of native controls: Tab reaches it, arrows or Space choose, as everywhere.
      const multiple = q.kind === 'MULTIPLE_CHOICE';
      const options = multiple ? q.options : [{ id: 'true', label: 'Yes' }, { id: 'false', label: 'No' }];
      const group = h('div', { role: multiple ? 'group' : 'radiogroup', id, testid: common.testid,
        'aria-labelledby': `${id}-label`, 'aria-describedby': describedBy });
      for (const o of options) {
        const value = multiple ? o.id : o.id === 'true';
        const checked = multiple ? (v || []).includes(o.id) : v === value;
        const input = styled(h('input', { type: multiple ? 'checkbox' : 'radio', name: `${prefix}answers.${q.id}`, value: o.id,
          id: `${id}-${o.id}`, checked, disabled: multiple && gone(q, o.id) && !checked, testid: `question-${q.id}-${o.id}` }), BOX);
        input.addEventListener('change', () => {
          if (multiple) {
            const now = new Set(state.answers[q.id] || []);
            if (input.checked) now.add(o.id); else now.delete(o.id);
            state.answers[q.id] = q.options.map((x) => x.id).filter((x) => now.has(x));
          } else {
            state.answers[q.id] = value;
          }
          changed();
        });
        group.append(styled(h('label', { for: `${id}-${o.id}` }, input, ` ${multiple ? optionText(q, o) : o.label}`), CHOICE));
      }
      return group;
    }
    const attrs = { SHORT_TEXT: { type: 'text', maxlength: String(q.maxLength || 200) },
      NUMBER: { type: 'number', inputmode: 'decimal', step: q.wholeNumber ? '1' : 'any',
        min: q.min != null ? String(q.min) : null, max: q.max != null ? String(q.max) : null },
      DATE: { type: 'text', inputmode: 'numeric', placeholder: 'YYYY-MM-DD' },
      PHONE: { type: 'tel', autocomplete: 'tel' } }[q.kind] || { type: 'text' };
    const el = h('input', { ...common, ...attrs });
    el.value = v == null ? '' : String(v);
    el.addEventListener('input', () => {
      const raw = el.value.trim();
      state.answers[q.id] = q.kind === 'NUMBER' ? (raw === '' ? null : Number(raw)) : el.value;
      changed();
    });
    if (q.kind === 'DATE') {
      el.addEventListener('change', () => { state.answers[q.id] = el.value = normaliseDate(el.value); changed(); });
    }
    return el;
  }

  for (const q of set.questions) {
    const id = `q-${idp}${q.id}`;
    const name = `${prefix}answers.${q.id}`;
    const hint = q.help ? h('p', { id: `${id}-hint`, cls: 'hint' }, q.help) : null;
    const err = error(name, id);
    const input = control(q, id, `${hint ? `${id}-hint ` : ''}${id}-err`);
    if (q.required && input.tagName !== 'DIV') input.setAttribute('aria-required', 'true');
    fields[name] = { input: input.tagName === 'DIV' ? input.querySelector('input') : input, err };
    const label = `${q.label}${q.required ? '' : ' (optional)'}`;
    blocks[q.id] = h('div', { cls: 'field', testid: `block-${q.id}` },
      input.tagName === 'DIV' ? styled(h('p', { id: `${id}-label` }, label), LABEL) : h('label', { for: id }, label),
      hint, err, input);
    host.append(blocks[q.id]);
  }

  // The waiver: its text, the runner's acceptance, and under the adult age a guardian's.
  const guardian = h('div', { testid: 'guardian-step', hidden: true });
  if (set.waiver) {
    const box = (bare, label, key) => {
      const name = prefix + bare;
      const id = `f-${name.replace(/\./g, '-')}`;
      const err = error(name, id);
      const input = styled(h('input', { type: 'checkbox', id, name, testid: `field-${name}`,
        checked: state.waiver[key] === true, 'aria-describedby': `${id}-err` }), BOX);
      input.addEventListener('change', () => { state.waiver[key] = input.checked; changed(); });
      fields[name] = { input, err };
      return h('div', { cls: 'field' }, err, styled(h('label', { for: id }, input, ` ${label}`), CHOICE));
    };
    const gid = `f-${idp}waiver-guardianName`;
    const gerr = error(`${prefix}waiver.guardianName`, gid);
    const gname = h('input', { id: gid, name: `${prefix}waiver.guardianName`, testid: `field-${prefix}waiver.guardianName`,
      autocomplete: 'name', maxlength: '200', 'aria-describedby': `${gid}-err` });
    gname.value = state.waiver.guardianName || '';
    gname.addEventListener('input', () => { state.waiver.guardianName = gname.value; save(); });
    fields[`${prefix}waiver.guardianName`] = { input: gname, err: gerr };
    guardian.append(
      h('p', { cls: 'hint' }, `The runner is under ${set.adultAge} on race day: a parent or guardian accepts too.`),
      h('div', { cls: 'field' }, h('label', { for: gid }, 'Parent or guardian’s full name'), gerr, gname),
      box('waiver.guardianAccepted', 'I am the runner’s parent or guardian and accept the waiver for them.',
        'guardianAccepted'));
    host.append(h('fieldset', { testid: 'waiver-step' }, h('legend', {}, 'Waiver'),
      styled(h('div', { tabindex: '0', role: 'region', 'aria-label': 'Waiver text', testid: 'waiver-text' },
        set.waiver.text), WAIVER),
      box('waiver.accepted', 'I have read and accept the waiver.', 'accepted'), guardian));
  }
  changed();
  // Under the adult age or not: the guardian. A form without the date's field (a switch's: the
  // registration's date stands) has nothing to listen to.
  fields[`${prefix}dateOfBirth`]?.input.addEventListener('input', changed);

  return {
    // The fields the runner must fix before sending ({name: message}), marked under each.
    check() {
      const errs = {};
      for (const q of set.questions) {
        if (!shown(q, state.answers, byId)) continue;
        const v = state.answers[q.id];
        const out = q.options ? q.options.find((o) => gone(q, o.id) && (Array.isArray(v) ? v.includes(o.id) : v === o.id)) : null;
        const msg = checkAnswer(q, v) || (out ? `${out.label} is sold out; please choose another.` : '');
        if (msg) errs[`${prefix}answers.${q.id}`] = msg;
      }
      if (set.waiver) {
        if (state.waiver.accepted !== true) errs[`${prefix}waiver.accepted`] = 'Please read and accept the waiver.';
        if (needsGuardian(state.dateOfBirth, raceDate, set.adultAge)) {
          if (!String(state.waiver.guardianName || '').trim()) {
            errs[`${prefix}waiver.guardianName`] = 'Enter the parent or guardian’s name.';
          }
          if (state.waiver.guardianAccepted !== true) {
            errs[`${prefix}waiver.guardianAccepted`] = 'A parent or guardian must accept the waiver.';
          }
        }
      }
      for (const n of Object.keys(fields)) {
        if (n.startsWith(prefix) && /^(answers|waiver)\./.test(n.slice(prefix.length))) setErr(n, errs[n]);
      }
      return errs;
    },
    // What the registration sends: the answers to the questions shown, and the acceptance.
    body() {
      const answers = {};
      for (const q of set.questions) {
        const v = state.answers[q.id];
        if (shown(q, state.answers, byId) && !blank(v)) answers[q.id] = typeof v === 'string' ? v.trim() : v;
      }
      const out = { answers };
      if (set.waiver) {
        const minor = needsGuardian(state.dateOfBirth, raceDate, set.adultAge);
        out.waiver = { accepted: state.waiver.accepted === true };
        if (minor) {
          out.waiver.guardianName = String(state.waiver.guardianName || '').trim() || null;
          out.waiver.guardianAccepted = state.waiver.guardianAccepted === true;
        }
      }
      return out;
    },
    refresh: changed,
  };
}
