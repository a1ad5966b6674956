// The documented admin API (/api/admin/…), with the director's ID token in the
// Authorization header, as API Gateway's JWT authorizer expects it. Whatever the console
// does, a script with a token can do with the same calls.

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message || `The API answered ${status}.`);
    this.status = status;
    this.code = body?.error;
    this.fields = body?.fields || body?.details || null;
    this.body = body;
  }
}

// The API's 503 and 429 carry Retry-After and mean nothing was decided (a busy moment, a rate
// limit): the console asks again when told, a few times, before showing the director an error.
const BUSY_TRIES = 3;
const BUSY_MAX_S = 5;

function busyWait(response, busy) {
  const after = Number(response.headers.get('Retry-After'));
  if ((response.status !== 503 && response.status !== 429) || !(after > 0) || busy >= BUSY_TRIES) return null;
  return Math.min(after, BUSY_MAX_S) * 1000;
}

function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(new DOMException('The page moved on.', 'AbortError'));
    }, { once: true });
  });
}

export function adminApi(session, { onSignedOut = () => {} } = {}) {
  async function request(method, path, body, { raw = false, signal, headers = {} } = {}) {
    let refreshed = false;
    for (let busy = 0; ;) {
      const token = await session.idToken({ force: refreshed });
      if (!token) {
        onSignedOut();
        throw new ApiError(401, { message: 'Your session has ended. Please sign in again.' });
      }
      const response = await fetch(`/api/admin${path}`, {
        method,
        credentials: 'omit',
        headers: { Authorization: `Bearer ${token}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
        body: body !== undefined ? JSON.stringify(body) : undefined,
        signal,
      });
      if (response.status === 401 && !refreshed) { // an ID token that expired on the way
        refreshed = true;
        continue;
      }
      const wait = busyWait(response, busy);
      if (wait !== null) {
        busy += 1;
        await pause(wait, signal);
        continue;
      }
      if (raw && response.ok) return response;
      const data = response.status === 204 ? null : await response.json().catch(() => null);
      if (!response.ok) throw new ApiError(response.status, data);
      return data;
    }
  }
  // A page's reads are its route's: when the director moves on, the reads of the page left
  // behind are cancelled (an AbortError the router ignores), so a slow page can never draw
  // itself over the one that replaced it. Changes (POST, PATCH, PUT) always run to the end.
  let routeCtl = null;
  function client(signal) {
    return {
      get: (path) => request('GET', path, undefined, { signal }),
      // ``headers``: e.g. an Idempotency-Key, so a retried change is the same change.
      post: (path, body = {}, { headers } = {}) => request('POST', path, body, { headers }),
      patch: (path, body) => request('PATCH', path, body),
      put: (path, body) => request('PUT', path, body),
      delete: (path) => request('DELETE', path),
      download: (path) => request('GET', path, undefined, { raw: true, signal }),
      postForFile: (path, body) => request('POST', path, body, { raw: true }),
      forRoute() {
        if (routeCtl) routeCtl.abort();
        routeCtl = new AbortController();
        return client(routeCtl.signal);
      },
    };
  }
  return client(undefined);
}
