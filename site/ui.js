// Shared view helpers: DOM building, formatting, session storage, the view lifecycle
// (each view gets an AbortSignal that stops its timers and requests when it is left).

export const enc = encodeURIComponent;
export const POLL_S = [10, 20, 40, 60]; // the paper's waiting-screen schedule, then 60 s forever
export const DETAILS = ['email', 'firstName', 'lastName', 'dateOfBirth'];
export const pollScale = () => (/[?&]fastpoll=1\b/.test(location.search + location.hash) ? 0.1 : 1);
const $view = document.getElementById('view');
const $live = document.getElementById('live');

export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'testid') el.dataset.testid = v;
    else el.setAttribute(k === 'cls' ? 'class' : k, v === true ? '' : v);
  }
  for (const kid of kids.flat()) if (kid != null && kid !== false) el.append(kid);
  return el;
}

export const setText = (el, t) => {
  if (el.textContent !== t) el.textContent = t;
};

// Announce through the page's one polite live region.
export const say = (msg) => {
  $live.textContent = '';
  setTimeout(() => ($live.textContent = msg), 60);
};

// sessionStorage can be full or disabled: then the page works but forgets on reload.
export const store = {
  get(k) {
    try {
      return JSON.parse(sessionStorage.getItem(`racecap:${k}`));
    } catch {
      return null;
    }
  },
  set(k, v) {
    try {
      sessionStorage.setItem(`racecap:${k}`, JSON.stringify(v));
    } catch { /* see above */ }
  },
  del(k) {
    try {
      sessionStorage.removeItem(`racecap:${k}`);
    } catch { /* see above */ }
  },
};

// Timestamps may arrive as ISO strings or as epoch seconds/milliseconds.
export function toMs(v) {
  if (v == null || v === '') return NaN;
  const n = Number(v);
  return Number.isFinite(n) ? (n < 1e12 ? n * 1000 : n) : Date.parse(v);
}

export function money(cents, currency) {
  if (cents == null) return '';
  if (!cents) return 'Free';
  try {
    const f = new Intl.NumberFormat(undefined, { style: 'currency', currency: currency || 'USD' });
    return f.format(cents / 10 ** f.resolvedOptions().maximumFractionDigits);
  } catch {
    return `${(cents / 100).toFixed(2)} ${currency || ''}`.trim();
  }
}

// A race day ("2026-04-19") is a calendar date: format it without shifting time zones.
export function day(s) {
  const only = /^\d{4}-\d{2}-\d{2}$/.test(s || '');
  const d = new Date(only ? `${s}T12:00:00Z` : toMs(s));
  if (Number.isNaN(d.getTime())) return s || '';
  const o = { weekday: 'short', day: 'numeric', month: 'short', year: 'numeric' };
  return d.toLocaleDateString(undefined, only ? { ...o, timeZone: 'UTC' } : o);
}

// An instant as the race's local time (its IANA zone, when known), with the zone's name.
export function when(v, timeZone) {
  const t = toMs(v);
  const o = { day: 'numeric', month: 'short', hour: 'numeric', minute: '2-digit', timeZoneName: 'short' };
  try {
    return Number.isNaN(t) ? '' : new Date(t).toLocaleString(undefined, timeZone ? { ...o, timeZone } : o);
  } catch {
    return new Date(t).toLocaleString(undefined, o); // a zone this browser does not know
  }
}

// Rounds down: a countdown never promises more time than is left.
export function duration(ms) {
  let s = Math.max(0, Math.floor(ms / 1000));
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const p = (n) => String(n).padStart(2, '0');
  const hh = Math.floor(s / 3600);
  const clock = `${d || hh ? `${hh}:${p(Math.floor(s / 60) % 60)}` : Math.floor(s / 60)}:${p(s % 60)}`;
  return d ? `${d} d ${clock}` : clock;
}

export function every(ms, fn, signal) {
  const t = setInterval(fn, ms);
  signal.addEventListener('abort', () => clearInterval(t));
  fn();
}

// A live line (announced once) plus a quiet line for ticking seconds, so screen readers
// are not read a countdown every second.
export function statusLines(testid) {
  const live = h('p', { role: 'status', testid, cls: 'status' });
  const quiet = h('p', { cls: 'muted', testid: `${testid}-detail` });
  let t;
  return {
    el: [live, quiet],
    set(msg, cls = '') {
      clearInterval(t);
      live.className = `status ${cls}`;
      setText(live, msg);
      setText(quiet, '');
    },
    wait(seconds, fmt) {
      clearInterval(t);
      const end = Date.now() + seconds * 1000;
      const tick = () => setText(quiet, fmt(Math.max(0, Math.ceil((end - Date.now()) / 1000))));
      tick();
      t = setInterval(tick, 500);
    },
  };
}

export const BUSY = 'Busy: lots of runners right now. Retrying automatically…';

export const errorBox = (msg, retry) =>
  h('div', { cls: 'alert', role: 'alert', testid: 'error' }, h('p', {}, msg),
    retry && h('button', { type: 'button', testid: 'retry', onclick: retry }, 'Try again'));

export const backLink = (raceId) =>
  h('p', {}, h('a', { href: raceId ? `#/races/${enc(raceId)}` : '#/' }, raceId ? 'Back to the race' : 'See all races'));

let viewCtl = new AbortController();

// Start a new view: stops the previous one, sets the heading (focused on navigation).
export function page(title) {
  viewCtl.abort();
  viewCtl = new AbortController();
  const h1 = h('h1', { tabindex: '-1', testid: 'page-title' }, title);
  const body = h('div', { cls: 'stack' });
  $view.replaceChildren(h1, body);
  $view.removeAttribute('aria-busy');
  document.title = `${title} · Racecap`;
  return { h1, body, signal: viewCtl.signal };
}

export function retitle(h1, title) {
  h1.textContent = title;
  document.title = `${title} · Racecap`;
}

export function go(path, replace) {
  if (!replace) {
    location.hash = `#${path}`;
    return;
  }
  history.replaceState(null, '', `#${path}`);
  window.dispatchEvent(new HashChangeEvent('hashchange'));
}
