// An event's waitlist (racecap.waitlist), one route of the app (waitlistPage) for three pages:
//   #/waitlist/join/{raceId}/{eventId}  join a sold-out event's list: name and email, then a
//                                       proof-of-work solved here (pow.js, the queue's own)
//   #/waitlist/{token}                  the emailed link: confirms the address (safe to repeat), keeps
//                                       the token for this tab and replaces the address with #/waitlist
//                                       so it does not stay in the history (tokens hold no "/")
//   #/waitlist                          my place in line (the kept token), and leaving
//   #/waitlist/offer/{token}            the offer email's link: kept for this tab, replaced by
//   #/waitlist/offer                    the offered place: claim it (it becomes my hold, then the
//                                       usual form and payment: hold.js) or pass it on
import { api, withBusyRetry } from './api.js';
import { device } from './identity.js';
import { solve } from './pow.js';
import { askFirst, focusState } from './ask.js';
import { backLink, enc, errorBox, go, h, money, page, retitle, say, setText, store, when } from './ui.js';

const HEADER = 'X-Racecap-Waitlist';
const KEY = 'waitlist';
const OFFER_KEY = 'waitlistOffer';
const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]{2,}$/;

// `rest` is "" for #/waitlist (the app's pattern always captures: an absent group would arrive
// as the text "undefined").
export function waitlistPage(rest) {
  const [first, raceId, eventId] = (rest || '').split('/');
  if (!rest) return positionPage();
  if (first === 'offer') return raceId ? keepOffer(raceId) : offerPage();
  if (first === 'join' && eventId) return joinPage(decodeURIComponent(raceId), decodeURIComponent(eventId));
  return confirmPage(rest);
}

function joinPage(raceId, eventId) {
  const { h1, body, signal } = page('Join the waitlist');
  const fields = [['firstName', 'First name', 'text', 'given-name'], ['lastName', 'Last name', 'text', 'family-name'],
    ['email', 'Email address', 'email', 'email']];
  const inputs = {}; // by the API's field names, so a 400's `fields` lands under each
  const rows = fields.map(([name, label, type, ac]) => {
    const err = h('p', { cls: 'field-error', id: `wl-${name}-err`, testid: `wl-${name}-error` });
    const input = h('input', { id: `wl-${name}`, name, type, autocomplete: ac, required: true,
      'aria-describedby': `wl-${name}-err`, testid: `wl-${name}` });
    inputs[name] = { input, err };
    return h('div', { cls: 'field' }, h('label', { for: `wl-${name}` }, label), input, err);
  });
  const st = h('p', { role: 'status', testid: 'wl-status' });
  const send = h('button', { type: 'submit', cls: 'primary', testid: 'wl-join' }, 'Join the waitlist');
  const form = h('form', { novalidate: true, testid: 'wl-form' }, rows, send, st);
  const bad = (name, msg) => {
    setText(inputs[name].err, msg);
    inputs[name].input.setAttribute('aria-invalid', 'true');
  };
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const value = Object.fromEntries(Object.entries(inputs).map(([k, { input }]) => [k, input.value.trim()]));
    for (const { input, err } of Object.values(inputs)) (setText(err, ''), input.removeAttribute('aria-invalid'));
    if (!value.firstName) bad('firstName', 'Enter your first name.');
    if (!value.lastName) bad('lastName', 'Enter your last name.');
    if (!EMAIL.test(value.email)) bad('email', 'Enter an email address like name@example.com.');
    const first = Object.values(inputs).find(({ input }) => input.hasAttribute('aria-invalid'));
    if (first) return first.input.focus();
    send.disabled = true;
    try {
      await device(signal);
      setText(st, 'Proving this is a person, not a script: a few seconds of work for your device…');
      // The opening queue's challenge: bound to this race and device, spent once.
      const ch = (await withBusyRetry(() => api('POST', `/races/${enc(raceId)}/queue/challenge`, { signal }), { signal })).data;
      const nonce = await solve(ch.challenge, ch.difficulty, { signal });
      const { data } = await api('POST', `/races/${enc(raceId)}/events/${enc(eventId)}/waitlist`,
        { body: { ...value, challenge: ch.challenge, nonce }, signal });
      retitle(h1, 'Check your inbox');
      body.replaceChildren(h('p', { role: 'status', testid: 'wl-sent' }, data.message), backLink(raceId));
      say(data.message);
      body.querySelector('a').focus();
    } catch (e) {
      if (signal.aborted) return;
      const wrong = Object.entries((e.body && e.body.fields) || {}).filter(([k]) => inputs[k]);
      for (const [k, msg] of wrong) bad(k, msg);
      if (wrong.length) inputs[wrong[0][0]].input.focus();
      setText(st, wrong.length ? '' : e.message);
      send.disabled = false;
    }
  });
  body.append(
    h('p', {}, 'This event is sold out. Join its waitlist: when a place frees up it is offered to the next runner in '
      + 'line, by email. We first email you a link to confirm your address; you take your place in line when you open it.'),
    form, backLink(raceId));
}

// The emailed link: confirm (a repeat answers the same), keep the token, show the place.
function confirmPage(token) {
  const { h1, body, signal } = page('Confirming your place');
  const st = h('p', { role: 'status', testid: 'wl-confirm-status' }, 'Confirming…');
  body.append(st);
  (async () => {
    try {
      await api('POST', '/waitlist/confirm', { body: { token }, signal });
      store.set(KEY, token);
      go('/waitlist', true);
    } catch (e) {
      if (signal.aborted) return;
      retitle(h1, 'Not on the waitlist');
      body.replaceChildren(errorBox(e.message), backLink());
    }
  })();
}

function positionPage() {
  const { h1, body, signal } = page('My place on the waitlist');
  const kept = store.get(KEY);
  if (!kept) {
    body.append(h('p', { testid: 'wl-no-link' }, 'Open the link in your waitlist email to see your place.'), backLink());
    return;
  }
  const call = (method) => api(method, '/waitlist/me', { signal, headers: { [HEADER]: kept } });

  async function show(announce) {
    let me;
    try {
      me = (await call('GET')).data;
    } catch (e) {
      if (signal.aborted) return;
      body.replaceChildren(errorBox(e.message, e.status !== 401 && e.status !== 404 && (() => show())), backLink());
      return;
    }
    retitle(h1, `Waitlist: ${me.raceName}, ${me.eventName}`);
    const rows = [
      me.position && ['Your place in line', String(me.position), 'wl-position'],
      me.number && ['Your number', String(me.number), 'wl-number'],
    ].filter(Boolean);
    const status = h('p', { role: 'status', testid: 'wl-state', 'data-state': me.state }, me.message);
    body.replaceChildren(status,
      rows.length ? h('dl', {}, rows.flatMap(([dt, dd, testid]) => [h('dt', {}, dt), h('dd', { testid }, dd)])) : '',
      me.state === 'WAITING' || me.state === 'PENDING' ? leaveSection() : '',
      backLink(me.raceId));
    if (announce) say(me.message);
  }

  function leaveSection() {
    const box = h('section', { 'aria-labelledby': 'wl-leave-title', testid: 'wl-leave' },
      h('h2', { id: 'wl-leave-title' }, 'Leave the waitlist'));
    const start = h('button', { type: 'button', testid: 'wl-leave-start' }, 'Leave the waitlist');
    box.append(h('p', { cls: 'muted' }, 'Your name and address are deleted at once. If you join again later, '
      + 'you go to the back of the line.'), start);
    askFirst(start, { id: 'wl-leave', question: 'Leave the waitlist? You lose your place in line.',
      yes: 'Yes, leave the waitlist', no: 'No, keep my place', label: 'Leave the waitlist?' }, async () => {
      await call('DELETE');
      await show(true);
      focusState('wl-state');
    });
    return box;
  }

  show(true);
}

// The offer's token leaves the address bar (and the history) at once: it is the offer.
function keepOffer(token) {
  store.set(OFFER_KEY, token);
  go('/waitlist/offer', true);
}

function offerPage() {
  const { h1, body, signal } = page('A place offered to you');
  const token = store.get(OFFER_KEY);
  if (!token) {
    body.append(h('p', { testid: 'wl-no-offer' }, 'Open the link in your offer email to see the place.'), backLink());
    return;
  }
  const call = (path) => api('POST', path, { body: { token }, signal });

  async function show(announce) {
    let offer;
    try {
      offer = (await call('/waitlist/offer')).data;
    } catch (e) {
      if (signal.aborted) return;
      body.replaceChildren(errorBox(e.message, e.status >= 500 && (() => show())), backLink());
      return;
    }
    retitle(h1, `${offer.raceName}: ${offer.eventName}`);
    const open = offer.state === 'OFFERED' && Date.parse(offer.expiresAt) > Date.now();
    const status = h('p', { role: 'status', testid: 'wl-offer-state', 'data-state': offer.state }, offer.message);
    const facts = open ? h('dl', {},
      h('dt', {}, 'Claim it before'), h('dd', { testid: 'wl-offer-deadline' }, when(offer.expiresAt)),
      h('dt', {}, 'Price'), h('dd', { testid: 'wl-offer-price' }, money(offer.priceCents, offer.currency))) : '';
    const claimed = offer.state === 'CLAIMED' && offer.holdId
      ? h('p', {}, h('a', { href: `#/holds/${enc(offer.holdId)}`, testid: 'wl-offer-hold' }, 'Register and pay')) : '';
    body.replaceChildren(status, facts, open ? actions() : claimed, backLink(offer.raceId));
    if (announce) say(offer.message);
  }

  function actions() {
    const st = h('p', { role: 'alert', testid: 'wl-offer-error' });
    const claim = h('button', { type: 'button', cls: 'primary', testid: 'wl-offer-claim' }, 'Claim my place');
    const pass = h('button', { type: 'button', testid: 'wl-offer-decline' }, 'Pass it on');
    const box = h('section', { 'aria-label': 'The offered place', testid: 'wl-offer-actions' },
      h('p', { cls: 'muted' }, 'Claiming holds the place for you; then register and pay as usual, with the address '
        + 'this offer was sent to.'), claim, pass, st);
    claim.addEventListener('click', async () => {
      claim.disabled = true;
      pass.disabled = true;
      try {
        const { data } = await call('/waitlist/offer/claim');
        go(`/holds/${enc(data.holdId)}`);
      } catch (e) {
        if (signal.aborted) return;
        if (e.status === 410 || e.status === 409) return show(true); // ended: the page says how
        setText(st, e.message);
        claim.disabled = false;
        pass.disabled = false;
      }
    });
    askFirst(pass, { id: 'wl-offer-decline', question: 'Pass the place on? It goes to the next runner in line at once.',
      yes: 'Yes, pass it to the next runner', no: 'No, keep the offer', label: 'Pass the place on?' }, async () => {
      await call('/waitlist/offer/decline');
      await show(true);
      focusState('wl-offer-state');
    });
    return box;
  }

  show(true);
}
