// Tiny DOM helpers: elements are built with properties and text nodes, never from HTML
// strings, so nothing a director or a runner typed can become markup.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2).toLowerCase(), value);
    else if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key in el && !key.includes('-')) el[key] = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function announce(text) {
  const live = document.getElementById('live');
  live.textContent = '';
  setTimeout(() => (live.textContent = text), 50);
}

/** Replace the view and move focus to its heading (a screen reader starts there). */
export function show(...children) {
  const view = document.getElementById('view');
  view.replaceChildren(...children.filter((c) => c !== null && c !== undefined && c !== false));
  view.removeAttribute('aria-busy');
  const heading = view.querySelector('h1');
  if (heading) {
    heading.tabIndex = -1;
    heading.focus();
  }
}

/** A labelled input with its hint and error slot wired for assistive technology. */
export function field({ id, label, type = 'text', hint, ...attrs }) {
  const hintId = hint ? `${id}-hint` : undefined;
  const errorId = `${id}-error`;
  const input = h('input', { id, name: id, type, 'aria-describedby': [hintId, errorId].filter(Boolean).join(' '), ...attrs });
  const error = h('p', { id: errorId, class: 'error', hidden: true, 'data-testid': `${id}-error` });
  const wrap = h('div', { class: 'field' }, h('label', { htmlFor: id }, label), hint ? h('p', { id: hintId, class: 'hint' }, hint) : null, input, error);
  wrap.input = input;
  wrap.setError = (message) => {
    error.textContent = message || '';
    error.hidden = !message;
    input.setAttribute('aria-invalid', message ? 'true' : 'false');
  };
  return wrap;
}

/** A form whose submit button is disabled while `action` runs; its errors go to an alert. */
export function form({ submit, action, testid }, ...fields) {
  const alert = h('div', { class: 'alert', role: 'alert', hidden: true, 'data-testid': `${testid}-alert` });
  const button = h('button', { type: 'submit', class: 'primary', 'data-testid': `${testid}-submit` }, submit);
  const el = h('form', { 'data-testid': testid, noValidate: true }, alert, ...fields, button);
  el.fail = (message) => {
    alert.textContent = message;
    alert.hidden = !message;
  };
  el.addEventListener('submit', async (event) => {
    event.preventDefault();
    el.fail('');
    button.disabled = true;
    try {
      await action(el);
    } catch (err) {
      el.fail(err.message || String(err));
    } finally {
      button.disabled = false;
    }
  });
  return el;
}

/** A CSV export fetched page by page (X-Next-Cursor) with the token in a header, never in the
 * URL, then handed to the browser as one file. `path` already has its own query, if any. */
export async function downloadCsv(api, path, filename) {
  const parts = [];
  let next = '';
  do {
    const join = path.includes('?') ? '&' : '?';
    const response = await api.download(`${path}${next ? `${join}cursor=${encodeURIComponent(next)}` : ''}`);
    parts.push(await response.text());
    next = response.headers.get('X-Next-Cursor') || '';
  } while (next);
  const url = URL.createObjectURL(new Blob(parts, { type: 'text/csv' }));
  const a = h('a', { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

// How long a "Saved." stays: long enough to be read, short enough that it is not mistaken
// for the state of a form edited since.
const SAVED_MS = 8000;

/** A form's success note: a polite status (read once, without interrupting, unlike the
 * form's alert) that clears itself. It stays in the page while empty, so that assistive
 * technology already watches it when the text arrives. */
export function savedNote(testid) {
  const el = h('p', { class: 'saved', role: 'status', 'aria-live': 'polite', 'data-testid': testid });
  let timer = 0;
  el.say = (text) => {
    clearTimeout(timer);
    el.textContent = text;
    timer = setTimeout(() => (el.textContent = ''), SAVED_MS);
  };
  el.clear = () => {
    clearTimeout(timer);
    el.textContent = '';
  };
  return el;
}
