// #/ (race list) and #/races/{raceId} (events, places left, "Hold my place").
import { api, now, sleep, withBusyRetry } from './api.js';
import { device, mustQueue } from './identity.js';
import {
  BUSY, backLink, day, duration, enc, errorBox, every, go, h, money, page, retitle, say, setText, statusLines,
  store, toMs, when,
} from './ui.js';

const REFRESH_S = 15;
const CLOSED = ['CLOSED', 'CANCELLED', 'CANCELED', 'ENDED', 'FINISHED', 'ARCHIVED'];
const UPCOMING = ['SCHEDULED', 'UPCOMING', 'NOT_OPEN', 'NOT_YET_OPEN', 'PENDING'];
const LABEL = { open: 'Registration open', upcoming: 'Not open yet', soldout: 'Sold out', closed: 'Closed' };

// soldOutAt: our own hold was answered SOLD_OUT; that beats a few-seconds-stale
// spotsLeft for 30 s (places come back when other runners' holds expire).
function eventState(ev, raceSt, soldOutAt = {}) {
  if (raceSt !== 'open' && raceSt !== 'soldout') return raceSt;
  const s = String(ev.status || '').toUpperCase();
  const none = typeof ev.spotsLeft === 'number' && ev.spotsLeft <= 0;
  if (s === 'SOLD_OUT' || none || now() - (soldOutAt[ev.eventId] || -1e13) < 30000) return 'soldout';
  return CLOSED.includes(s) ? 'closed' : 'open';
}

// The server's status wins; the window's timestamps (on the server's clock) fill in.
function raceState(r, soldOutAt) {
  const s = String(r.status || '').toUpperCase();
  if (CLOSED.includes(s) || toMs(r.registrationClosesAt) <= now()) return 'closed';
  if (UPCOMING.includes(s) || (s !== 'OPEN' && toMs(r.registrationOpensAt) > now())) return 'upcoming';
  const evs = r.events || [];
  const full = evs.length && evs.every((e) => eventState(e, 'open', soldOutAt) === 'soldout');
  return s === 'SOLD_OUT' || full ? 'soldout' : 'open';
}

function raceLine(r, st) {
  const opens = toMs(r.registrationOpensAt);
  const closes = toMs(r.registrationClosesAt);
  if (st === 'upcoming') {
    return opens > now() ? `Registration opens in ${duration(opens - now())} (${when(opens, r.timeZone)}).`
      : 'Opening any moment…';
  }
  if (st === 'open') return closes ? `Registration closes ${when(closes, r.timeZone)}.` : '';
  if (st === 'soldout') return 'All places are taken. Places come back when holds expire, so check again soon.';
  return 'Registration is closed.';
}

const badge = (el, st) => {
  setText(el, LABEL[st]);
  el.className = `badge ${st}`;
  el.dataset.state = st;
};

export async function raceList() {
  const { body, signal } = page('Races');
  const load = async () => {
    body.replaceChildren(h('p', { cls: 'loading', testid: 'loading' }, 'Loading races…'));
    let races;
    try {
      races = (await withBusyRetry(() => api('GET', '/races', { signal }), { signal })).data.races || [];
    } catch (e) {
      if (!signal.aborted) body.replaceChildren(errorBox(e.message, load));
      return;
    }
    body.replaceChildren(races.length ? h('ul', { cls: 'cards', testid: 'race-list' }, races.map((r) => {
      const st = h('p', { testid: 'race-status' });
      badge(st, raceState(r));
      return h('li', { cls: 'card', testid: 'race-item', 'data-race-id': r.raceId },
        h('h2', {}, h('a', { href: `#/races/${enc(r.raceId)}`, testid: 'race-link', 'data-race-id': r.raceId },
          r.name || r.raceId)),
        h('p', { cls: 'muted' }, [r.location, day(r.raceDate || r.date)].filter(Boolean).join(' · ')), st,
        (r.events || []).length ? h('ul', { cls: 'event-lines', testid: 'list-events' }, r.events.map((ev) => {
          const soldOut = ev.status === 'SOLD_OUT';
          const left = Number(ev.spotsLeft);
          return h('li', { testid: 'list-event', 'data-state': soldOut ? 'soldout' : 'open' },
            `${ev.name}: ${money(ev.priceCents, ev.currency)}, `,
            h('span', { testid: 'list-event-places' }, soldOut ? 'sold out'
              : `${left} place${left === 1 ? '' : 's'} left`));
        })) : null);
    })) : h('p', { testid: 'races-empty' }, 'No races are taking registrations right now.'));
  };
  await load();
}

// A live hold from earlier in this tab: offer to continue rather than hold twice.
function heldFor(raceId) {
  for (let i = 0; i < sessionStorage.length; i++) {
    const k = sessionStorage.key(i);
    const hd = k.startsWith('racecap:hold:') && store.get(k.slice(8));
    if (hd && hd.raceId === raceId && !hd.registrationId && toMs(hd.expiresAt) > now()) return hd;
  }
  return null;
}

// Published results get a link on their event's card (the answer is cached for seconds).
async function resultsLinks(raceId, rows, signal) {
  let events;
  try {
    events = (await api('GET', `/races/${enc(raceId)}/results`, { signal })).data.events || [];
  } catch {
    return; // no link is the safe fallback: results stay reachable once they load
  }
  for (const ev of events) {
    const r = rows.get(ev.eventId);
    if (r && ev.published && !r.el.querySelector('[data-testid="results-link"]')) {
      r.el.append(h('p', {}, h('a', { href: `#/races/${enc(raceId)}/events/${enc(ev.eventId)}/results`,
        testid: 'results-link' }, `Results: ${ev.finishers} finishers`)));
    }
  }
}

export async function racePage(raceId) {
  const { h1, body, signal } = page('Loading race…');
  const info = h('p', { cls: 'muted', testid: 'race-info' });
  const status = h('p', { testid: 'race-status' });
  const line = h('p', { testid: 'race-countdown' });
  const list = h('ul', { cls: 'cards', testid: 'event-list' });
  const note = h('p', { cls: 'muted small', testid: 'refresh-note' });
  const rows = new Map();
  const soldOutAt = {};
  let race = null;
  let holding = false;
  let gone = false;
  let was = '';
  body.append(h('p', { cls: 'loading', testid: 'loading' }, 'Loading race…'));

  const row = (ev) => {
    const r = {
      name: h('h2', { testid: 'event-name' }),
      price: h('p', { cls: 'price', testid: 'event-price' }),
      spots: h('p', { testid: 'spots-left' }),
      state: h('p', { testid: 'event-status' }),
      btn: h('button', { type: 'button', cls: 'primary', testid: 'hold-button', 'data-event-id': ev.eventId },
        'Hold my place'),
      st: statusLines('hold-status'),
    };
    r.btn.addEventListener('click', () => hold(r));
    // Team entries (team.js, loaded when asked for): the captain holds the team's places at once.
    r.team = ev.teamMaxSize && h('div', {}, h('button', { type: 'button', cls: 'link', testid: 'enter-team',
      onclick: (e) => import('./team.js').then((m) => m.teamChooser(e.target.parentNode, { raceId, race, ev: r.ev, signal })),
    }, `Enter a team (${ev.teamMinSize}–${ev.teamMaxSize} runners)`));
    // A sold-out event with a waitlist: its line's door (waitlist.js).
    r.wait = h('p', { hidden: true }, h('a', { href: `#/waitlist/join/${enc(raceId)}/${enc(ev.eventId)}`,
      testid: 'waitlist-link' }, 'Join the waitlist'));
    // An event drawn from a ballot's applications (ballot.js): no holds, its window and commitment.
    r.ballot = h('div', { hidden: true, testid: 'ballot' },
      r.ballotLine = h('p', { testid: 'ballot-window' }),
      h('p', { cls: 'muted' }, 'Commitment to the draw\'s seed (SHA-256): ',
        r.commit = h('code', { testid: 'ballot-commitment' })),
      r.seed = h('p', { cls: 'muted', hidden: true }, 'The seed, revealed at the draw: ',
        r.seedText = h('code', { testid: 'ballot-seed' })),
      r.apply = h('p', {}, h('a', { href: `#/ballot/apply/${enc(raceId)}/${enc(ev.eventId)}`, testid: 'ballot-apply' },
        'Apply to the ballot')),
      h('p', {}, h('a', { href: `#/ballot/draw/${enc(raceId)}/${enc(ev.eventId)}`, testid: 'ballot-draw' },
        'The draw, and how to check it')),
      h('p', {}, h('a', { href: `#/ballot/guaranteed/${enc(raceId)}/${enc(ev.eventId)}`, testid: 'ballot-guaranteed' },
        'I have a guaranteed entry')));
    r.commit.style.overflowWrap = r.seedText.style.overflowWrap = 'anywhere'; // 64 hex digits wrap on a phone (CSSOM: the CSP allows no style attribute)
    r.el = h('li', { cls: 'card', testid: 'event', 'data-event-id': ev.eventId },
      r.name, r.price, r.spots, r.state, r.btn, r.team, r.wait, r.ballot, r.st.el);
    return r;
  };

  // Rows are updated in place, so a refresh never steals keyboard focus.
  const update = () => {
    if (!race) return;
    const rs = raceState(race, soldOutAt);
    if (was && rs !== was && rs === 'open') say('Registration is now open.');
    was = rs;
    badge(status, rs);
    setText(line, raceLine(race, rs));
    for (const ev of race.events || []) {
      const r = rows.get(ev.eventId);
      const es = eventState(ev, rs, soldOutAt);
      const left = Number(ev.spotsLeft);
      r.ev = ev;
      setText(r.name, ev.name || ev.eventId);
      const next = (ev.priceChanges || [])[0]; // "$35 until 1 May, then $45"
      setText(r.price, money(ev.priceCents, ev.currency) + (next
        ? ` until ${when(next.startsAt, race.timeZone)}, then ${money(next.priceCents, ev.currency)}` : ''));
      setText(r.spots, es === 'soldout' ? 'No places left' : Number.isFinite(left)
        ? `${left} place${left === 1 ? '' : 's'} left${ev.cap ? ` of ${ev.cap}` : ''}` : '');
      badge(r.state, es);
      r.btn.hidden = es !== 'open';
      if (r.team) r.team.hidden = es !== 'open';
      r.wait.hidden = !(es === 'soldout' && ev.waitlist);
      r.btn.disabled = holding;
      const b = ev.ballot;
      r.ballot.hidden = !b;
      if (b) {
        r.btn.hidden = true;
        if (r.team) r.team.hidden = true;
        r.wait.hidden = true;
        const tz = race.timeZone;
        setText(r.ballotLine, r.drawnText || (b.phase === 'UPCOMING'
          ? `Places are drawn by ballot: applications open ${when(b.opensAt, tz)} until ${when(b.closesAt, tz)}.`
          : b.phase === 'OPEN' ? `Places are drawn by ballot: applications are open until ${when(b.closesAt, tz)}.`
            : `The ballot is closed: the draw is at ${when(b.drawAt, tz)}.`));
        setText(r.commit, b.commitment);
        r.apply.hidden = b.phase !== 'OPEN';
        // Once drawn, the seed beside its commitment (the draw's page has the list and the check).
        if (b.phase === 'CLOSED' && Date.parse(b.drawAt) <= Date.now() && !r.drawn) {
          r.drawn = api('GET', `/races/${enc(raceId)}/events/${enc(ev.eventId)}/ballot/draw`, { signal })
            .then(({ data }) => {
              r.drawnText = `Drawn on ${when(data.drawnAt, tz)}: ${data.winners} places to the winners, `
                + `from ${data.applications} applications.`;
              setText(r.ballotLine, r.drawnText);
              setText(r.seedText, data.seed);
              r.seed.hidden = false;
            }, () => { r.drawn = null; }); // not drawn yet: asked again at the next refresh
        }
      }
    }
  };

  const load = async (first) => {
    try {
      // While the race's waiting room is on, a runner not yet admitted waits there first.
      const queued = first && mustQueue(raceId, signal).catch(() => false);
      race = (await api('GET', `/races/${enc(raceId)}`, { signal })).data;
      if (await queued) {
        [race, gone] = [null, true]; // this view stops: no refresh, no countdown
        return go(`/races/${enc(raceId)}/queue`, true);
      }
    } catch (e) {
      if (signal.aborted) return;
      gone = e.status === 404;
      if (first || gone) {
        if (gone) retitle(h1, 'Race not found');
        body.replaceChildren(errorBox(gone ? 'We could not find this race.' : e.message, !gone && (() => load(true))),
          backLink());
        race = null;
      } else setText(note, 'Could not refresh places left; trying again shortly.');
      return;
    }
    setText(note, `Places left refresh every ${REFRESH_S} seconds and can be a few seconds behind.`);
    const ids = new Set((race.events || []).map((e) => e.eventId));
    for (const [id, r] of rows) if (!ids.has(id)) (r.el.remove(), rows.delete(id));
    for (const ev of race.events || []) {
      if (!rows.has(ev.eventId)) list.append(rows.set(ev.eventId, row(ev)).get(ev.eventId).el);
    }
    if (!list.isConnected) {
      retitle(h1, race.name || 'Race');
      setText(info, [race.location, day(race.raceDate || race.date)].filter(Boolean).join(' · '));
      const held = heldFor(raceId);
      body.replaceChildren(info, status, line,
        held ? h('p', { cls: 'alert info', testid: 'continue-hold' }, `You are holding a place in ${held.eventName}. `,
          h('a', { href: `#/holds/${enc(held.holdId)}` }, 'Continue your registration')) : '',
        list, note,
        h('p', {}, h('a', { href: `#/races/${enc(raceId)}/find`, testid: 'find-link' },
          'Already registered? Find my registration')));
      import('./hold.js').catch(() => {}); // warm the next page while the runner reads
      resultsLinks(raceId, rows, signal);
    }
    update();
  };

  async function hold(r) {
    const ev = r.ev;
    holding = true;
    update();
    r.st.set('Holding your place…');
    try {
      await device(signal); // the per-device hold limit keys on it (identity.js sends it)
      const { data } = await withBusyRetry(
        () => api('POST', `/races/${enc(raceId)}/events/${enc(ev.eventId)}/holds`, { signal }),
        {
          signal,
          attempts: 10,
          onWait: (s, n) => {
            r.st.set(BUSY, 'warn');
            r.st.wait(s, (left) => `Attempt ${n + 1} in ${left} s.`);
          },
        },
      );
      store.set(`hold:${data.holdId}`, {
        holdId: data.holdId, expiresAt: data.expiresAt, heldAt: now(), raceId, raceName: race.name,
        eventId: ev.eventId, eventName: ev.name, priceCents: data.priceCents ?? ev.priceCents, currency: ev.currency,
        raceDate: race.raceDate, minAge: ev.minAge, maxAge: ev.maxAge, ageRule: ev.ageRule,
      });
      return go(`/holds/${enc(data.holdId)}`);
    } catch (e) {
      if (signal.aborted) return;
      if (e.code === 'QUEUE_ADMISSION_REQUIRED') return go(`/races/${enc(raceId)}/queue`);
      if (e.code === 'SOLD_OUT') soldOutAt[ev.eventId] = now();
      r.st.set({
        SOLD_OUT: 'Sorry, this event has just sold out.',
        REGISTRATION_CLOSED: 'Registration for this race is not open.',
      }[e.code] || (e.status === 404 ? 'This event is no longer available.' : e.message), 'err');
      if (e.status === 409) load();
    }
    holding = false;
    update();
  }

  await load(true);
  every(1000, update, signal);
  // Refresh places left, jittered so a crowd does not poll in step; just after the
  // opening time look again within 1-3 s (for two minutes at most).
  while (!gone) {
    const untilOpen = race && raceState(race) === 'upcoming' ? toMs(race.registrationOpensAt) - now() : NaN;
    let wait = REFRESH_S * 1000 * (0.9 + Math.random() * 0.2);
    if (untilOpen > -120000) wait = Math.min(wait, Math.max(0, untilOpen) + 1000 + Math.random() * 2000);
    try {
      await sleep(wait, signal);
    } catch {
      return;
    }
    while (document.hidden) await new Promise((ok) => document.addEventListener('visibilitychange', ok, { once: true }));
    if (signal.aborted) return;
    await load(!race);
  }
}
