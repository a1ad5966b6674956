// #/races/{raceId}/queue: the opening's waiting room (racecap.fairness.queue).
// Join once per device: ask for a challenge, solve its proof-of-work here (pow.js), send
// the proof; the queue token that comes back is kept with the device token, so a reload,
// a reopened browser or a second tab shows the same place rather than taking another.
// Then poll when the server says (Retry-After / retryAfterSeconds: rarely while far from
// the front, often near it), showing the position and the estimated wait; while waiting
// with a known number, the poll is the shared, edge-cached "now serving". Admitted, the
// admission token is kept for this race's holds and the runner goes back to the race page.
import { api, sleep, withBusyRetry } from './api.js';
import { device, forgetDevice, keep } from './identity.js';
import { solve } from './pow.js';
import { BUSY, backLink, duration, enc, errorBox, go, h, page, retitle, say, setText, when } from './ui.js';

const TOKEN_PROBLEMS = ['INVALID_TOKEN', 'TOKEN_EXPIRED', 'TOKEN_NOT_YOURS', 'DEVICE_TOKEN_REQUIRED'];

export function queuePage(raceId) {
  const { h1, body, signal } = page('Waiting room');
  const state = h('p', { role: 'status', testid: 'queue-state', cls: 'status' }, 'Getting your place in line…');
  const position = h('p', { cls: 'queue-position', testid: 'queue-position' });
  const wait = h('p', { testid: 'queue-wait' });
  const detail = h('p', { cls: 'muted', testid: 'queue-detail' });
  body.append(state, position, wait, detail,
    h('p', { cls: 'muted' }, 'Keep this page open: it updates by itself. Reloading it or opening it in another '
      + 'tab keeps your place; it does not give you a second one.'), backLink(raceId));
  const busy = {
    signal,
    attempts: 12,
    onWait: (s) => setText(detail, `${BUSY} Next try in ${Math.ceil(s)} s.`),
  };
  let announced = '';

  const show = (v) => {
    state.dataset.state = v.state;
    setText(state, v.message);
    position.hidden = !(v.position > 0);
    setText(position, v.position > 0 ? `Your place in line: ${v.position}` : '');
    position.dataset.position = v.position ?? '';
    let w = '';
    if (v.state === 'WAITING' && v.estimatedWaitSeconds != null) {
      w = `Estimated wait: ${duration(v.estimatedWaitSeconds * 1000)} (about ${v.admissionRatePerMinute} runners `
        + 'are let in each minute).';
    } else if (v.state === 'WAITING_FOR_DRAW' && v.opensAt) {
      w = `Registration opens ${when(v.opensAt)}. Everyone in line by then gets a random place; arriving earlier `
        + 'does not help.';
    }
    setText(wait, w);
    if (v.state !== announced) (announced = v.state, say(v.message));
  };

  const join = async () => {
    setText(detail, 'Proving this is a person, not a script: a few seconds of work for your device…');
    const ch = (await withBusyRetry(() => api('POST', `/races/${enc(raceId)}/queue/challenge`, { signal }), busy)).data;
    const nonce = await solve(ch.challenge, ch.difficulty, {
      signal,
      onProgress: (n) => (detail.dataset.tries = n),
    });
    setText(detail, '');
    const proof = { challenge: ch.challenge, nonce };
    return (await withBusyRetry(() => api('POST', `/races/${enc(raceId)}/queue`, { body: proof, signal }), busy)).data;
  };

  const poll = async () => {
    const qt = keep.get(`queue:${raceId}`);
    const headers = qt ? { 'X-Racecap-Queue': qt } : {};
    const { data, retryAfter } = await withBusyRetry(
      () => api('GET', `/races/${enc(raceId)}/queue`, { signal, headers }), busy);
    return { ...data, retryAfterSeconds: retryAfter ?? data.retryAfterSeconds };
  };

  const step = async () => {
    await device(signal);
    let v = keep.get(`queue:${raceId}`) ? await poll() : null;
    if (!v || (v.state === 'WAITING' && !v.queueToken)) {
      v = (await poll()).state === 'OFF' ? { state: 'OFF' } : await join();
    }
    if (v.queueToken) keep.set(`queue:${raceId}`, v.queueToken);
    return v;
  };

  // Between this runner's own checks: the shared "now serving" figure (the same answer
  // for everyone, cached ~1 s at the edge) and this runner's number give the position.
  // Null once the front is reached (or the queue changed): then this runner's own check.
  const said = {};
  const shared = async (v) => {
    const { data: ns } = await withBusyRetry(
      () => api('GET', `/races/${enc(raceId)}/queue/now-serving`, { signal }), busy);
    const left = v.number - ns.nowServing;
    if (!ns.queueEnabled || !ns.drawn || left <= 0) return null;
    const rate = ns.admissionRatePerMinute;
    const secs = Math.ceil((left * 60) / rate);
    const st = ns.paused ? 'PAUSED' : 'WAITING';
    return {
      ...v, state: st, position: left, admissionRatePerMinute: rate, estimatedWaitSeconds: ns.paused ? null : secs,
      message: said[st] || (ns.paused ? 'Admission is paused for a moment; you keep your place.'
        : 'You are in the queue; keep this page open.'),
      retryAfterSeconds: ns.paused ? 10 : Math.min(30, Math.max(1, secs / 4)),
    };
  };

  (async () => {
    let v = null;
    for (let retried = false; ;) {
      try {
        const next = v && v.number && (v.state === 'WAITING' || v.state === 'PAUSED') ? await shared(v) : null;
        v = next || (await step());
        if (!next) said[v.state] = v.message;
      } catch (e) {
        if (signal.aborted) return;
        if (!retried && TOKEN_PROBLEMS.includes(e.code)) {
          // A place or device the server no longer honours: start again, once.
          retried = true;
          v = null;
          keep.del(`queue:${raceId}`);
          if (e.code !== 'TOKEN_NOT_YOURS') forgetDevice();
          continue;
        }
        body.replaceChildren(errorBox(e.message, () => queuePage(raceId)), backLink(raceId));
        return;
      }
      if (v.state === 'OFF') return go(`/races/${enc(raceId)}`, true);
      show(v);
      if (v.state === 'ADMITTED') {
        keep.set(`admission:${raceId}`, { token: v.admissionToken, expiresAt: v.admissionExpiresAt });
        retitle(h1, 'It is your turn');
        await sleep(800, signal).catch(() => {});
        if (!signal.aborted) go(`/races/${enc(raceId)}`);
        return;
      }
      if (v.state === 'EXPIRED') {
        keep.del(`queue:${raceId}`);
        keep.del(`admission:${raceId}`);
        body.append(h('button', { type: 'button', testid: 'rejoin', onclick: () => queuePage(raceId) }, 'Join again'));
        return;
      }
      // Jittered, so a crowd that joined together does not poll in step.
      const s = Math.max(1, Number(v.retryAfterSeconds) || 5) * (0.9 + Math.random() * 0.2);
      try {
        await sleep(s * 1000, signal);
      } catch {
        return;
      }
    }
  })();
}
