// The runner API on the same origin (base from <meta name="api-base">, default /api):
// JSON in and out, errors as ApiError, a server-clock offset for countdowns, and
// back-off retries that honour Retry-After.

const meta = document.querySelector('meta[name="api-base"]');
const BASE = ((meta && meta.content) || '/api').replace(/\/+$/, '');

let skewMs = 0;
// "Now" on the server's clock (from the Date header), so countdowns to opening and
// hold expiry do not depend on the runner's phone clock being right.
export const now = () => Date.now() + skewMs;

export class ApiError extends Error {
  constructor(status, code, message, body = null, retryAfter = null) {
    super(message);
    Object.assign(this, { status, code, body, retryAfter });
  }
  // Busy is the API's (or the edge's) load, worth retrying after Retry-After; a client at
  // its hold limit (TOO_MANY_HOLDS) is an answer for the runner, not a reason to retry.
  get busy() {
    return (this.status === 429 || this.status === 503) && this.code !== 'TOO_MANY_HOLDS';
  }
}

const FALLBACK = {
  0: 'We could not reach Racecap. Check your connection and try again.',
  404: 'We could not find that.',
  429: 'Lots of runners are registering right now.',
};

// Seconds from a Retry-After header (delta-seconds or HTTP date), or null.
export function retryAfterSeconds(value) {
  if (value == null || value === '') return null;
  const n = Number(value);
  if (Number.isFinite(n)) return Math.max(0, n);
  const t = Date.parse(value);
  return Number.isNaN(t) ? null : Math.max(0, (t - Date.now()) / 1000);
}

// Retry-After is honoured everywhere: after a 429/503 that names a wait, no call from
// this page goes out before the wait is over (it waits, it is not refused), whichever
// screen makes it, so a refresh timer or a second button cannot hammer a busy API.
let quietUntil = 0;

// Extra request headers for every call (the fairness tokens: queue.js registers them).
let headerHooks = [];
export const addHeaders = (fn) => {
  headerHooks = [...headerHooks, fn];
};

export async function api(method, path, { body, signal, headers } = {}) {
  let res;
  let data = null;
  if (Date.now() < quietUntil) await sleep(quietUntil - Date.now(), signal);
  try {
    res = await fetch(BASE + path, {
      method,
      signal,
      cache: 'no-store',
      headers: Object.assign(
        body === undefined ? { Accept: 'application/json' } : { 'Content-Type': 'application/json' },
        ...headerHooks.map((fn) => fn(method, path)),
        headers,
      ),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const date = Date.parse(res.headers.get('Date') || '');
    // Date has 1 s resolution and is truncated: the server's clock is at most 1 s ahead of it.
    // Erring ahead means a hold's countdown never promises more time than is left.
    if (!Number.isNaN(date)) skewMs = date + 1000 - Date.now();
    const text = res.status === 204 ? '' : await res.text();
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
  } catch (e) {
    if (signal && signal.aborted) throw e;
    throw new ApiError(0, 'NETWORK', FALLBACK[0]);
  }
  const retryAfter = retryAfterSeconds(res.headers.get('Retry-After'));
  if (!res.ok) {
    const d = data || {};
    if ((res.status === 429 || res.status === 503) && retryAfter && d.error !== 'TOO_MANY_HOLDS') {
      quietUntil = Math.max(quietUntil, Date.now() + retryAfter * 1000);
    }
    const msg = d.message || FALLBACK[res.status] || `Something went wrong (HTTP ${res.status}). Please try again.`;
    throw new ApiError(res.status, d.error || `HTTP_${res.status}`, msg, d, retryAfter);
  }
  return { status: res.status, data, retryAfter };
}

export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    if (signal) {
      signal.addEventListener('abort', () => {
        clearTimeout(t);
        reject(signal.reason || new DOMException('Aborted', 'AbortError'));
      }, { once: true });
    }
  });
}

// Calls fn() again while it fails with "busy" (429/503): waits Retry-After when given,
// else capped exponential back-off with full jitter so a crowd does not retry in step.
// onWait(seconds, attempt) lets the page say "busy, retrying in N s".
export async function withBusyRetry(fn, { signal, onWait, attempts = 8, baseS = 1, capS = 30 } = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof ApiError) || !e.busy || attempt >= attempts) throw e;
      const backoff = Math.random() * Math.min(capS, baseS * 2 ** attempt);
      const wait = e.retryAfter != null ? e.retryAfter + Math.random() : backoff + 1;
      if (onWait) onWait(wait, attempt);
      await sleep(wait * 1000, signal);
    }
  }
}
