// #/registrations/{id}: the waiting screen, then the confirmation (or failure).
// Checks at once, then when the server's Retry-After says (the writer's real backlog: 1 s
// when it is idle); without one, the RunSignUp paper's back-off (10, 20, 40, then every
// 60 s). ?fastpoll=1 divides every wait by 10.
import { api } from './api.js';
import { DETAILS, POLL_S, backLink, errorBox, enc, h, page, pollScale, retitle, say, setText, store } from './ui.js';

export function registrationPage(regId) {
  const { h1, body, signal } = page('Confirming your registration');
  const ctx = store.get(`reg:${regId}`) || {};
  const status = h('p', { role: 'status', testid: 'registration-status', 'data-status': 'QUEUED' },
    'Your registration is in the queue: we are confirming your place and payment.');
  const next = h('p', { testid: 'poll-countdown' });
  const bar = h('progress', { testid: 'poll-progress', max: '1', value: '0', 'aria-label': 'Time until the next check' });
  body.append(status, next, bar,
    h('p', { cls: 'muted' }, 'Keep this page open; it checks automatically. There is no need to register again.'));

  const done = (data) => {
    store.del(`poll:${regId}`);
    const st = String(data.status).toUpperCase();
    const pick = (k, obj, sub) => data[k] || (data[obj] && data[obj][sub]) || ctx[k] || '';
    if (st === 'CONFIRMED') {
      const bib = String(data.bib ?? '');
      const raceName = pick('raceName', 'race', 'name');
      store.del('carry');
      retitle(h1, 'You are in!');
      body.replaceChildren(
        h('p', { role: 'status', testid: 'registration-status', 'data-status': st }, 'Registration confirmed.'),
        h('div', { cls: 'bib' }, h('span', {}, 'Bib number'), h('strong', { testid: 'bib' }, bib || 'by email')),
        h('dl', {},
          h('dt', {}, 'Runner'), h('dd', { testid: 'confirmation-runner' },
            `${pick('firstName', 'runner', 'firstName')} ${pick('lastName', 'runner', 'lastName')}`.trim()),
          h('dt', {}, 'Event'), h('dd', { testid: 'confirmation-event' }, pick('eventName', 'event', 'name')),
          raceName && [h('dt', {}, 'Race'), h('dd', { testid: 'confirmation-race' }, raceName)]),
        h('p', {}, `A confirmation email is on its way${ctx.email || data.email ? ` to ${data.email || ctx.email}` : ''}.`),
        backLink());
      say(`Registration confirmed. ${bib ? `Your bib number is ${bib}.` : ''}`);
    } else if (st === 'CANCELLED' || st === 'CANCELLING') {
      retitle(h1, 'Registration cancelled');
      body.replaceChildren(
        h('div', { cls: 'alert', role: 'status', testid: 'registration-cancelled', 'data-status': st },
          h('p', {}, data.message || 'This registration was cancelled.')),
        backLink(data.raceId || ctx.raceId));
      say(data.message || 'This registration was cancelled.');
    } else {
      // Keep the runner's details for a new hold: the form prefills from "carry".
      store.set('carry', Object.fromEntries(DETAILS.map((n) => [n, ctx[n]])));
      retitle(h1, 'Registration not completed');
      body.replaceChildren(
        h('div', { cls: 'alert', role: 'alert', testid: 'registration-failed', 'data-status': st },
          h('p', {}, data.message || data.reason || 'We could not complete your registration.'),
          h('p', {}, 'You are not registered. You can hold a new place and try again.')),
        backLink(ctx.raceId));
    }
  };

  (async () => {
    // The schedule survives a reload; a link opened elsewhere checks at once.
    const st = store.get(`poll:${regId}`) || { n: 0, next: Date.now() };
    for (;;) {
      const total = Math.max(1, st.total || st.next - Date.now());
      while (Date.now() < st.next) {
        const left = st.next - Date.now();
        setText(next, `Checking again in ${Math.ceil(left / 1000)} s.`);
        bar.value = 1 - left / total;
        await new Promise((ok) => setTimeout(ok, Math.min(250, left)));
        if (signal.aborted) return;
      }
      setText(next, 'Checking now…');
      bar.removeAttribute('value'); // indeterminate while the request is out
      let retryAfter = null;
      try {
        const res = await api('GET', `/registrations/${enc(regId)}`, { signal });
        const s = String((res.data && res.data.status) || '').toUpperCase();
        if (['CONFIRMED', 'FAILED', 'CANCELLING', 'CANCELLED'].includes(s)) return done(res.data);
        retryAfter = res.retryAfter;
      } catch (e) {
        if (signal.aborted) return;
        if (e.status === 404) {
          store.del(`poll:${regId}`);
          retitle(h1, 'Registration not found');
          return body.replaceChildren(errorBox('We could not find this registration.'), backLink());
        }
        retryAfter = e.retryAfter;
        setText(status, e.busy ? 'Lots of runners are registering right now; still waiting.'
          : 'We could not check just now and will try again. Your registration is not lost.');
      }
      const waitS = retryAfter == null ? POLL_S[Math.min(st.n + 1, 3)] : Math.min(300, Math.max(1, retryAfter));
      st.n += 1;
      st.total = waitS * 1000 * pollScale();
      st.next = Date.now() + st.total;
      store.set(`poll:${regId}`, st);
    }
  })();
}
