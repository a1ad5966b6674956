// Who this browser is to the fairness layer (racecap.fairness.identity): a signed device
// token asked for once (POST /api/device) and kept in localStorage, so every tab and a
// reopened browser are the same device (one queue place, one hold limit); and, per race,
// the queue token and the admission token its waiting room issued. api.js sends them:
// the device token on every call, the admission token on that race's holds.
import { addHeaders, api, withBusyRetry } from './api.js';

// localStorage can be full or disabled: then the page still works, per tab.
const memory = new Map();
export const keep = {
  get(k) {
    try {
      return JSON.parse(localStorage.getItem(`racecap:${k}`));
    } catch {
      return memory.get(k) ?? null;
    }
  },
  set(k, v) {
    memory.set(k, v);
    try {
      localStorage.setItem(`racecap:${k}`, JSON.stringify(v));
    } catch { /* see above */ }
  },
  del(k) {
    memory.delete(k);
    try {
      localStorage.removeItem(`racecap:${k}`);
    } catch { /* see above */ }
  },
};

let asking = null;

// The device token, asked for on the first visit only (one request shared by callers).
export async function device(signal) {
  const have = keep.get('device');
  if (have) return have;
  if (!asking) {
    asking = withBusyRetry(() => api('POST', '/device', { signal }), { signal })
      .then(({ data }) => (keep.set('device', data.deviceToken), data.deviceToken))
      .finally(() => (asking = null));
  }
  return asking;
}

// A token the server refused as not valid (another stack's key, tampered, expired) is
// dropped so the next call asks afresh.
export const forgetDevice = () => keep.del('device');

// The admission for a race while it is valid ({token, expiresAt} in epoch seconds), else null.
export function admission(raceId) {
  const a = keep.get(`admission:${raceId}`);
  if (a && a.expiresAt * 1000 > Date.now()) return a;
  if (a) keep.del(`admission:${raceId}`);
  return null;
}

const HOLDS = /^\/races\/([^/]+)\/events\/[^/]+\/holds$/;

addHeaders((method, path) => {
  const out = {};
  const dev = keep.get('device');
  if (dev) out['X-Racecap-Device'] = dev;
  const m = method === 'POST' && HOLDS.exec(path);
  const adm = m && admission(decodeURIComponent(m[1]));
  if (adm) out['X-Racecap-Admission'] = adm.token;
  return out;
});

// For the race page: must this runner go through the race's waiting room first? (Its
// queue is on and this device holds no valid admission for it.)
export async function mustQueue(raceId, signal) {
  if (admission(raceId)) return false;
  await device(signal);
  const { data } = await api('GET', `/races/${encodeURIComponent(raceId)}/queue`, { signal });
  return data.state !== 'OFF';
}
