// The opening's fairness settings (the queue on or off, its admission rate, hold limits,
// proof-of-work difficulty) and pausing or resuming admission from the queue.
import { announce, h, savedNote } from './dom.js';

const enc = encodeURIComponent;
const NUMBERS = [
  ['admissionRatePerMinute', 'Runners admitted per minute', 1, 100000],
  ['holdLimit', 'Places one device may hold at once', 1, 50],
  ['addressHoldLimit', 'Places one network address may hold at once', 1, 100000],
  ['powDifficulty', 'Proof-of-work difficulty (bits)', 0, 28],
];

export async function fairnessSection(api, raceId) {
  let view = await api.get(`/races/${enc(raceId)}/fairness`);
  const box = h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': 'fairness-alert' });
  const queueOn = h('input', { id: 'fair-queueEnabled', type: 'checkbox', checked: view.queueEnabled });
  const numbers = NUMBERS.map(([name, label, min, max]) => {
    const control = h('input', { id: `fair-${name}`, name, type: 'number', min, max, value: view[name], 'aria-describedby': `fair-${name}-error` });
    const error = h('p', { id: `fair-${name}-error`, class: 'error', hidden: true });
    return { name, control, error, wrap: h('div', { class: 'field' }, h('label', { htmlFor: control.id }, label), control, error) };
  });
  const figures = h('p', { role: 'status', 'data-testid': 'queue-figures' });
  const pause = h('button', { type: 'button', 'data-testid': 'queue-pause' }, 'Pause admission');
  const resume = h('button', { type: 'button', 'data-testid': 'queue-resume' }, 'Resume admission');
  const save = h('button', { type: 'submit', 'data-testid': 'save-fairness' }, 'Save fairness settings');
  const note = savedNote('fairness-saved');

  function render() {
    const q = view.queue;
    figures.textContent = `Queue ${view.queueEnabled ? 'on' : 'off'}${view.paused ? ', paused' : ''} · ${q.length} waiting · ${q.admitted} of ${q.entered} admitted`;
    pause.disabled = view.paused || !view.queueEnabled;
    resume.disabled = !view.paused;
  }

  const form = h('form', { noValidate: true, 'data-testid': 'fairness-form' }, box,
    h('div', { class: 'field check' }, queueOn, h('label', { htmlFor: queueOn.id }, 'Opening queue (a waiting room for the opening)')),
    ...numbers.map((n) => n.wrap), save, note);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    save.disabled = true;
    box.hidden = true;
    note.clear();
    const changes = typed();
    for (const n of numbers) {
      n.error.hidden = true;
      n.control.setAttribute('aria-invalid', 'false');
    }
    try {
      // The version these settings were read at: a change meanwhile (another tab or director,
      // a pause, the opening's draw) answers 409 rather than being overwritten.
      view = await api.patch(`/races/${enc(raceId)}/fairness`, { expectedVersion: view.version, ...changes });
      render();
      note.say('Fairness settings saved.');
    } catch (err) {
      if (err.status === 409 && err.code === 'CONFLICT') return changedMeanwhile(changes).catch((e) => fail(e.message));
      for (const n of numbers) {
        const message = err.fields?.[n.name];
        if (message) {
          n.error.textContent = message;
          n.error.hidden = false;
          n.control.setAttribute('aria-invalid', 'true');
        }
      }
      fail(err.message);
    } finally {
      save.disabled = false;
    }
  });

  function fail(message) {
    box.className = 'alert';
    box.textContent = message;
    box.hidden = false;
  }

  // What the director changed from the version shown.
  function typed() {
    const out = {};
    if (queueOn.checked !== view.queueEnabled) out.queueEnabled = queueOn.checked;
    for (const n of numbers) if (Number(n.control.value) !== view[n.name]) out[n.name] = Number(n.control.value);
    return out;
  }

  // A 409: show the latest settings, keep what was typed over them, and edit on top of the
  // latest version, so saving again applies the typed changes to it.
  async function changedMeanwhile(kept) {
    const latest = await api.get(`/races/${enc(raceId)}/fairness`);
    const labels = { queueEnabled: 'the opening queue', paused: 'pausing', ...Object.fromEntries(NUMBERS.map(([k, l]) => [k, l.toLowerCase()])) };
    const theirs = Object.keys(labels).filter((k) => latest[k] !== view[k]).map((k) => labels[k]);
    view = latest;
    if (!('queueEnabled' in kept)) queueOn.checked = view.queueEnabled;
    for (const n of numbers) if (!(n.name in kept)) n.control.value = view[n.name];
    render();
    fail(`These settings were changed meanwhile (now version ${view.version})${theirs.length ? `: ${theirs.join(', ')} changed` : ''}. ` +
      'What you typed is kept; check it, then save again to apply it over the latest version.');
    box.focus();
  }
  for (const [button, action] of [[pause, 'pause'], [resume, 'resume']]) {
    button.addEventListener('click', async () => {
      try {
        view = await api.post(`/races/${enc(raceId)}/queue/${action}`);
        render();
        announce(action === 'pause' ? 'Admission paused.' : 'Admission resumed.');
      } catch (err) {
        fail(err.message);
      }
    });
  }
  render();
  return h('section', { 'aria-labelledby': 'fairness-heading' }, h('h2', { id: 'fairness-heading' }, 'Fairness and the opening queue'), figures, h('div', { class: 'row' }, pause, resume), form);
}
