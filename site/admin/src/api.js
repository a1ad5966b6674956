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

export function adminApi(session, { onSignedOut = () => {} } = {}) {
  async function request(method, path, body, { raw = false } = {}) {
    for (let attempt = 0; attempt < 2; attempt++) {
      const token = await session.idToken({ force: attempt > 0 });
      if (!token) {
        onSignedOut();
        throw new ApiError(401, { message: 'Your session has ended. Please sign in again.' });
      }
      const response = await fetch(`/api/admin${path}`, {
        method,
        credentials: 'omit',
        headers: { Authorization: `Bearer ${token}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
        body: body !== undefined ? JSON.stringify(body) : undefined,
      });
      if (response.status === 401 && attempt === 0) continue; // an ID token that expired on the way
      if (raw && response.ok) return response;
      const data = response.status === 204 ? null : await response.json().catch(() => null);
      if (!response.ok) throw new ApiError(response.status, data);
      return data;
    }
    onSignedOut();
    throw new ApiError(401, { message: 'Your session has ended. Please sign in again.' });
  }
  return {
    get: (path) => request('GET', path),
    post: (path, body = {}) => request('POST', path, body),
    patch: (path, body) => request('PATCH', path, body),
    put: (path, body) => request('PUT', path, body),
    download: (path) => request('GET', path, undefined, { raw: true }),
    postForFile: (path, body) => request('POST', path, body, { raw: true }),
  };
}
