// An event's registration questions and waiver (the admin API's …/events/{eventId}/questions):
// the director's own questions in order (every kind the API takes, help text, required, options
// with stock, "shown when" another answer matches), the built-in questions, and the waiver's
// text. Each save is the whole set as the next version, sent with the version it was edited
// from (expectedVersion): another save in between answers 409 and what was typed is kept.
// The API checks everything and names each field it refuses (questions.2.options.0.quantity);
// the error lands under that field. Nothing here re-states the API's rules beyond the hints.
import { announce, h, show } from './dom.js';
import { showInZone } from './zone.js';

const enc = encodeURIComponent;
const KINDS = [
  ['SHORT_TEXT', 'Short text'],
  ['LONG_TEXT', 'Long text'],
  ['SINGLE_CHOICE', 'One choice from a list'],
  ['MULTIPLE_CHOICE', 'Several choices from a list'],
  ['YES_NO', 'Yes or no'],
  ['NUMBER', 'Number'],
  ['DATE', 'Date'],
  ['COUNTRY', 'Country'],
  ['PHONE', 'Phone number'],
];
const CHOICE = ['SINGLE_CHOICE', 'MULTIPLE_CHOICE'];
const TEXT = ['SHORT_TEXT', 'LONG_TEXT'];
const CONDITION_KINDS = ['YES_NO', ...CHOICE];

// An id from a label, in the API's alphabet: a question's "t_shirt_size", an option's "Small".
function questionId(label) {
  const s = label.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '');
  return (/^[a-z]/.test(s) ? s : `q_${s}`).slice(0, 40).replace(/_+$/, '') || 'question';
}
function optionId(label) {
  return label.normalize('NFKD').replace(/[^A-Za-z0-9_-]+/g, '-').replace(/^[-_]+|-+$/g, '').slice(0, 40);
}

// A number as typed: empty is none; anything that is not a number is sent as typed, so the
// API's own field error names it (never silently 0).
function numberOrText(value) {
  const t = String(value ?? '').trim();
  if (t === '') return null;
  return /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : t;
}
const text = (v) => (v === null || v === undefined ? '' : String(v));

let keys = 0; // element ids follow a question or option wherever it moves (focus survives a re-render)

function optionFrom(o = {}) {
  return { key: ++keys, id: o.id || '', idTouched: Boolean(o.id), label: o.label || '', quantity: text(o.quantity) };
}

function questionFrom(q = {}) {
  return {
    key: ++keys,
    id: q.id || '',
    idTouched: Boolean(q.id),
    kind: q.kind || 'SHORT_TEXT',
    label: q.label || '',
    help: q.help || '',
    required: Boolean(q.required),
    maxLength: text(q.maxLength),
    options: (q.options || []).map(optionFrom),
    min: text(q.min),
    max: text(q.max),
    wholeNumber: Boolean(q.wholeNumber),
    when: q.showWhen ? q.showWhen.questionId : '',
    equals: q.showWhen ? String(q.showWhen.equals) : '',
  };
}

function draftFrom(view) {
  return {
    questions: view.questions.map(questionFrom),
    emergencyContact: view.builtIns.emergencyContact,
    club: view.builtIns.club,
    divisions: view.builtIns.divisions.map(optionFrom),
    waiverOn: Boolean(view.waiver),
    waiverText: view.waiver?.text || '',
  };
}

// The body of the PUT: the whole set, each question with the fields its kind takes.
function body(draft, expectedVersion) {
  const questions = draft.questions.map((q) => {
    const out = { id: q.id.trim(), kind: q.kind, label: q.label.trim(), required: q.required };
    if (q.help.trim()) out.help = q.help.trim();
    if (TEXT.includes(q.kind) && q.maxLength.trim()) out.maxLength = numberOrText(q.maxLength);
    if (CHOICE.includes(q.kind)) {
      out.options = q.options.map((o) => {
        const option = { id: o.id.trim(), label: o.label.trim() };
        if (o.quantity.trim()) option.quantity = numberOrText(o.quantity);
        return option;
      });
    }
    if (q.kind === 'NUMBER') {
      if (q.min.trim()) out.min = numberOrText(q.min);
      if (q.max.trim()) out.max = numberOrText(q.max);
      if (q.wholeNumber) out.wholeNumber = true;
    }
    if (q.when) {
      const on = draft.questions.find((x) => x.id === q.when);
      out.showWhen = { questionId: q.when, equals: on?.kind === 'YES_NO' ? q.equals === 'true' : q.equals };
    }
    return out;
  });
  return {
    questions,
    builtIns: {
      emergencyContact: draft.emergencyContact,
      club: draft.club,
      divisions: draft.divisions.map((o) => ({ id: o.id.trim(), label: o.label.trim() })),
    },
    waiver: draft.waiverOn ? { text: draft.waiverText } : null,
    expectedVersion,
  };
}

// -- controls bound to the draft, each wrapped with its API field name for errors --------------
function wrap(name, label, control, hint, extra = {}) {
  const error = h('p', { id: `${control.id}-error`, class: 'error', hidden: true });
  control.setAttribute('aria-describedby', `${hint ? `${control.id}-hint ` : ''}${control.id}-error`);
  return h('div', { class: extra.check ? 'field check' : 'field', dataset: { field: name } },
    ...(extra.check ? [control, h('label', { htmlFor: control.id }, label)] : [h('label', { htmlFor: control.id }, label), hint ? h('p', { id: `${control.id}-hint`, class: 'hint' }, hint) : null, control]),
    extra.check && hint ? h('p', { id: `${control.id}-hint`, class: 'hint' }, hint) : null,
    error);
}

function textInput(id, value, onInput, attrs = {}) {
  const el = h(attrs.multiline ? 'textarea' : 'input', { id, value, ...attrs, multiline: undefined });
  el.addEventListener('input', () => onInput(el.value));
  return el;
}

function checkbox(id, checked, onChange) {
  const el = h('input', { id, type: 'checkbox', checked });
  el.addEventListener('change', () => onChange(el.checked));
  return el;
}

function select(id, options, value, onChange) {
  const el = h('select', { id }, options.map(([v, label]) => h('option', { value: v, selected: v === value }, label)));
  el.addEventListener('change', () => onChange(el.value));
  return el;
}

// An error named by the API goes to the closest wrapper: "questions.2.showWhen.equals" falls
// back to "questions.2.showWhen"; what has no wrapper at all goes to the alert.
function showFieldErrors(root, fields) {
  const wrappers = new Map([...root.querySelectorAll('[data-field]')].map((w) => [w.dataset.field, w]));
  const messages = new Map();
  const unplaced = [];
  for (const [name, message] of Object.entries(fields || {})) {
    let at = name;
    while (at && !wrappers.has(at)) at = at.includes('.') ? at.slice(0, at.lastIndexOf('.')) : '';
    if (at) messages.set(at, [messages.get(at), message].filter(Boolean).join(' '));
    else unplaced.push(`${name}: ${message}`);
  }
  let first = null;
  for (const [name, w] of wrappers) {
    const message = messages.get(name) || '';
    const error = w.querySelector(':scope > .error');
    const control = w.querySelector('input, select, textarea, button');
    error.textContent = message;
    error.hidden = !message;
    if (control && control.tagName !== 'BUTTON') control.setAttribute('aria-invalid', message ? 'true' : 'false');
    if (message && !first) first = control;
  }
  return { first, unplaced };
}

// -- the page --------------------------------------------------------------------------------
export async function questionsPage(api, raceId, subnav) {
  const race = await api.get(`/races/${enc(raceId)}`);
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const event = race.events.find((e) => e.eventId === params.get('event')) || race.events[0];
  const heading = h('h1', {}, `Questions and waiver · ${race.name}`);
  const top = [h('p', {}, h('a', { href: '#/races' }, '← Your races')), heading, subnav(raceId, 'questions')];
  if (!event) return show(...top, h('p', {}, 'This race has no events yet: add one in Settings and events first.'));
  const base = `/races/${enc(raceId)}/events/${enc(event.eventId)}/questions`;
  let view = await api.get(base);
  let expected = view.version;
  let draft = draftFrom(view);

  const picker = race.events.length > 1
    ? h('div', { class: 'field' }, h('label', { htmlFor: 'questions-event' }, 'Event'),
      select('questions-event', race.events.map((e) => [e.eventId, e.name]), event.eventId, (id) => {
        location.hash = `#/races/${enc(raceId)}/questions?event=${enc(id)}`;
      }))
    : null;
  const status = h('p', { role: 'status', 'data-testid': 'questions-version' });
  const box = h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': 'questions-alert' });
  const builtIns = h('fieldset', { class: 'sub', 'data-testid': 'built-ins' });
  const list = h('div', { 'data-testid': 'question-list' });
  const waiver = h('fieldset', { class: 'sub', 'data-testid': 'waiver' });
  const add = h('button', { type: 'button', id: 'add-question', 'data-testid': 'add-question', onClick: () => {
    draft.questions.push(questionFrom());
    render(`q${draft.questions.at(-1).key}-label`);
  } }, 'Add a question');
  const save = h('button', { type: 'submit', class: 'primary', 'data-testid': 'save-questions' }, 'Save as a new version');
  const form = h('form', { noValidate: true, class: 'questions', 'data-testid': 'questions-form' },
    box, builtIns, h('h2', {}, 'Your questions'), h('p', { class: 'hint' }, 'Asked after the built-in questions, in this order.'),
    list, add, waiver, h('div', { class: 'actions' }, save));

  function say(message, cls = 'alert') {
    box.className = cls;
    box.textContent = message || '';
    box.hidden = !message;
  }

  function summary() {
    const when = view.savedAt ? showInZone(view.savedAt, race.timeZone) : '';
    status.textContent = view.version
      ? `Runners of ${event.name} are asked version ${view.version} (saved ${when}): ${view.form.length} question${view.form.length === 1 ? '' : 's'}${view.waiver ? ' and the waiver' : ''}.`
      : `${event.name} asks no questions yet (version 0).`;
  }

  const stockOf = (qid, oid) => view.stock.find((s) => s.questionId === qid && s.optionId === oid);

  // A list of options (a choice's, or the divisions): label, id, and for a choice its stock.
  function optionsEditor(owner, at, name, { stock }) {
    const rows = owner.options.map((o, j) => {
      const id = `o${o.key}`;
      const label = textInput(`${id}-label`, o.label, (v) => {
        o.label = v;
        if (!o.idTouched) idBox.value = o.id = optionId(v);
      }, { maxLength: 120 });
      const idBox = textInput(`${id}-id`, o.id, (v) => {
        o.id = v;
        o.idTouched = true;
      }, { maxLength: 40, autocomplete: 'off' });
      const cells = [
        wrap(`${at}.${j}.label`, `${name} ${j + 1}`, label),
        wrap(`${at}.${j}.id`, `${name} ${j + 1}: id in the export`, idBox),
      ];
      if (stock) {
        const counted = owner.savedId && o.idTouched ? stockOf(owner.savedId, o.id) : null;
        const hint = counted
          ? `${counted.taken} taken · ${counted.left} left of ${counted.quantity}.`
          : 'Leave empty for no limit.';
        const quantity = textInput(`${id}-quantity`, o.quantity, (v) => {
          o.quantity = v;
        }, { inputMode: 'numeric' });
        cells.push(wrap(`${at}.${j}.quantity`, `${name} ${j + 1}: how many there are`, quantity, hint));
      }
      const remove = h('button', { type: 'button', 'data-testid': 'remove-option', 'aria-label': `Remove ${name.toLowerCase()} ${j + 1}`, onClick: () => {
        owner.options.splice(j, 1);
        render(owner.options[j] ? `o${owner.options[j].key}-label` : `${at}-add`);
      } }, 'Remove');
      return h('div', { class: 'option', 'data-testid': 'option-row' }, ...cells, remove);
    });
    const addOption = h('button', { type: 'button', id: `${at}-add`, 'data-testid': 'add-option', onClick: () => {
      owner.options.push(optionFrom());
      render(`o${owner.options.at(-1).key}-label`);
    } }, `Add ${name.toLowerCase() === 'division' ? 'a division' : 'an option'}`);
    const error = h('p', { id: `${at}-add-error`, class: 'error', hidden: true });
    return h('div', { dataset: { field: at } }, ...rows, error, addOption);
  }

  function questionEditor(q, i) {
    const id = `q${q.key}`;
    const at = `questions.${i}`;
    const n = i + 1;
    const label = textInput(`${id}-label`, q.label, (v) => {
      q.label = v;
      if (!q.idTouched) idBox.value = q.id = questionId(v);
    }, { maxLength: 200 });
    const idBox = textInput(`${id}-id`, q.id, (v) => {
      q.id = v;
      q.idTouched = true;
    }, { maxLength: 40, autocomplete: 'off' });
    const kind = select(`${id}-kind`, KINDS, q.kind, (v) => {
      q.kind = v;
      render(`${id}-kind`);
    });
    const help = textInput(`${id}-help`, q.help, (v) => {
      q.help = v;
    }, { multiline: true, rows: 2, maxLength: 1000 });
    const required = checkbox(`${id}-required`, q.required, (v) => {
      q.required = v;
    });
    const parts = [
      h('div', { class: 'grid' },
        wrap(`${at}.label`, 'Question', label),
        wrap(`${at}.kind`, 'Kind of answer', kind),
        wrap(`${at}.id`, 'Id in the export', idBox, 'Names the answer’s column; keep it when you reword the question.')),
      wrap(`${at}.help`, 'Help text (optional)', help, 'Shown under the question.'),
      wrap(`${at}.required`, 'Required', required, null, { check: true }),
    ];
    if (TEXT.includes(q.kind)) {
      parts.push(wrap(`${at}.maxLength`, 'Longest answer (characters)', textInput(`${id}-maxLength`, q.maxLength, (v) => {
        q.maxLength = v;
      }, { inputMode: 'numeric' }), `Empty: ${q.kind === 'SHORT_TEXT' ? 200 : 4000}.`));
    }
    if (q.kind === 'NUMBER') {
      parts.push(h('div', { class: 'grid' },
        wrap(`${at}.min`, 'Smallest answer (optional)', textInput(`${id}-min`, q.min, (v) => {
          q.min = v;
        }, { inputMode: 'decimal' })),
        wrap(`${at}.max`, 'Largest answer (optional)', textInput(`${id}-max`, q.max, (v) => {
          q.max = v;
        }, { inputMode: 'decimal' }))),
      wrap(`${at}.wholeNumber`, 'Whole numbers only', checkbox(`${id}-whole`, q.wholeNumber, (v) => {
        q.wholeNumber = v;
      }), null, { check: true }));
    }
    if (CHOICE.includes(q.kind)) {
      parts.push(h('fieldset', { class: 'sub' }, h('legend', {}, 'Options'),
        optionsEditor(q, `${at}.options`, 'Option', { stock: true })));
    }
    // Shown when an earlier yes/no or choice question has a given answer.
    const earlier = draft.questions.slice(0, i).filter((x) => CONDITION_KINDS.includes(x.kind) && x.id.trim());
    const on = earlier.find((x) => x.id === q.when);
    const whenSelect = select(`${id}-when`, [['', 'Always'], ...earlier.map((x) => [x.id, `When “${x.label || x.id}” is answered…`])], q.when, (v) => {
      q.when = v;
      const chosen = draft.questions.find((x) => x.id === v);
      q.equals = chosen ? (chosen.kind === 'YES_NO' ? 'true' : chosen.options[0]?.id || '') : '';
      render(`${id}-when`);
    });
    if (q.when && !on) whenSelect.append(h('option', { value: q.when, selected: true }, `When “${q.when}” is answered… (not an earlier question)`));
    const when = [wrap(`${at}.showWhen`, 'Shown', whenSelect, on || !q.when ? null : 'Only a yes/no or choice question above this one can show it.')];
    if (on) {
      const values = on.kind === 'YES_NO' ? [['true', 'Yes'], ['false', 'No']] : on.options.map((o) => [o.id, o.label || o.id]);
      when.push(wrap(`${at}.showWhen.equals`, `… with the answer`, select(`${id}-equals`, values, q.equals, (v) => {
        q.equals = v;
      })));
    }
    parts.push(h('div', { class: 'grid' }, ...when));

    const move = (to, focus) => {
      draft.questions.splice(i, 1);
      draft.questions.splice(to, 0, q);
      render(focus);
    };
    const up = h('button', { type: 'button', id: `${id}-up`, disabled: i === 0, 'data-testid': 'move-up', 'aria-label': `Move question ${n} up`, onClick: () => move(i - 1, i - 1 === 0 ? `${id}-down` : `${id}-up`) }, 'Move up');
    const down = h('button', { type: 'button', id: `${id}-down`, disabled: i === draft.questions.length - 1, 'data-testid': 'move-down', 'aria-label': `Move question ${n} down`, onClick: () => move(i + 1, i + 1 === draft.questions.length - 1 ? `${id}-up` : `${id}-down`) }, 'Move down');
    const remove = h('button', { type: 'button', class: 'danger', 'data-testid': 'remove-question', 'aria-label': `Remove question ${n}`, onClick: () => {
      draft.questions.splice(i, 1);
      const next = draft.questions[i] || draft.questions[i - 1];
      render(next ? `q${next.key}-label` : 'add-question');
      announce(`Question ${n} removed; it is gone from runners' forms once you save.`);
    } }, 'Remove');
    return h('fieldset', { class: 'event question', 'data-testid': 'question-row', dataset: { questionId: q.id } },
      h('legend', {}, `Question ${n}${q.label ? `: ${q.label}` : ''}`),
      ...parts,
      h('div', { class: 'row' }, up, down, remove));
  }

  function renderBuiltIns() {
    builtIns.replaceChildren(
      h('legend', {}, 'Built-in questions'),
      h('p', { class: 'hint' }, 'Asked first, in this order, when switched on.'),
      wrap('builtIns.emergencyContact', 'Emergency contact: a name and a phone number (required)', checkbox('bi-emergency', draft.emergencyContact, (v) => {
        draft.emergencyContact = v;
      }), null, { check: true }),
      h('fieldset', { class: 'sub' }, h('legend', {}, 'Gender or division'),
        h('p', { class: 'hint' }, 'Required when you list any, e.g. Women, Men, Non-binary. The results upload uses it for categories. None listed: not asked.'),
        optionsEditor({ options: draft.divisions }, 'builtIns.divisions', 'Division', { stock: false })),
      wrap('builtIns.club', 'Club (optional for runners)', checkbox('bi-club', draft.club, (v) => {
        draft.club = v;
      }), null, { check: true }),
    );
  }

  function renderWaiver() {
    const area = textInput('waiver-text', draft.waiverText, (v) => {
      draft.waiverText = v;
    }, { multiline: true, rows: 8, maxLength: 20000 });
    area.disabled = !draft.waiverOn;
    const current = view.waiver
      ? `Runners now accept version ${view.waiver.version} (SHA-256 ${view.waiver.sha256.slice(0, 12)}…). Saving makes the next version; each registration keeps the version its runner accepted.`
      : 'No waiver yet.';
    waiver.replaceChildren(
      h('legend', {}, 'Waiver'),
      h('p', { 'data-testid': 'waiver-version' }, current),
      wrap('waiverOn', 'Runners must accept a waiver (a parent or guardian too, for a runner under 18 on race day)', checkbox('waiver-on', draft.waiverOn, (v) => {
        draft.waiverOn = v;
        area.disabled = !v;
      }), null, { check: true }),
      wrap('waiver', 'Waiver text', area, 'Plain text, shown to runners as written.'),
    );
  }

  // Rebuilt from the draft on every change of shape (a question added, moved, removed, a kind
  // or a condition changed); focus goes back to the control named by `focusId`.
  function render(focusId) {
    const focused = focusId || document.activeElement?.id;
    renderBuiltIns();
    list.replaceChildren(...draft.questions.map(questionEditor));
    if (!draft.questions.length) list.append(h('p', { 'data-testid': 'no-questions' }, 'No questions of your own yet.'));
    renderWaiver();
    add.disabled = draft.questions.length >= 40;
    if (focused) document.getElementById(focused)?.focus();
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    save.disabled = true;
    say('');
    showFieldErrors(form, null);
    try {
      view = await api.put(base, body(draft, expected));
      expected = view.version;
      draft = draftFrom(view); // saved ids stay put from now on: answers are filed under them
      for (const q of draft.questions) q.savedId = q.id;
      summary();
      render();
      say(`Saved as version ${view.version}. Runners are asked it from now on.`, 'note');
      announce(`Saved as version ${view.version}.`);
    } catch (err) {
      const latest = err.status === 409 && err.code === 'CONFLICT' ? await api.get(base) : null;
      if (latest && latest.version !== expected) {
        expected = latest.version;
        view = { ...latest };
        for (const q of draft.questions) q.savedId = view.questions.some((x) => x.id === q.id) ? q.id : null;
        summary();
        render();
        say(`These questions were saved meanwhile (now version ${latest.version}, at ${showInZone(latest.savedAt, race.timeZone)}). What you typed is kept: save again to make it the next version, or reload the page to see theirs.`);
        return box.focus();
      }
      const { first, unplaced } = showFieldErrors(form, err.fields);
      say([err.message, ...unplaced].join(' '));
      (first || box).focus();
    } finally {
      save.disabled = false;
    }
  });

  for (const q of draft.questions) q.savedId = q.id;
  summary();
  render();
  show(...top, picker, status,
    h('p', {}, 'What runners are asked when they register, beyond their email, name and date of birth. Saving never changes what runners already answered: each registration keeps the version it answered.'),
    form);
}
