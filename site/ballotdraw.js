// A ballot's draw as published (ballot.js's #/ballot/draw/{raceId}/{eventId}, loaded when asked for):
// the figures, the commitment and the revealed seed, the list's pages, and how anyone checks it.
import { api } from './api.js';
import { backLink, enc, errorBox, h, page, retitle, when } from './ui.js';

export function drawPage(raceId, eventId) {
  const { h1, body, signal } = page('The ballot draw');
  body.append(h('p', { cls: 'loading' }, 'Loading…'));
  (async () => {
    let race;
    let drawn;
    try {
      race = (await api('GET', `/races/${enc(raceId)}`, { signal })).data;
      drawn = (await api('GET', `/races/${enc(raceId)}/events/${enc(eventId)}/ballot/draw`, { signal })).data;
    } catch (e) {
      if (signal.aborted) return;
      const ev = race && (race.events || []).find((x) => x.eventId === eventId);
      if (e.status === 404 && ev && ev.ballot) {
        retitle(h1, `The ballot draw: ${race.name}, ${ev.name}`);
        body.replaceChildren(
          h('p', { testid: 'bal-not-drawn' }, `Not drawn yet: the draw is at ${when(ev.ballot.drawAt, race.timeZone)}.`),
          commitment(ev.ballot.commitment), backLink(raceId));
        return;
      }
      body.replaceChildren(errorBox(e.message), backLink(raceId));
      return;
    }
    const ev = (race.events || []).find((x) => x.eventId === eventId) || { name: eventId };
    retitle(h1, `The ballot draw: ${race.name}, ${ev.name}`);
    const base = `/api/races/${enc(raceId)}/events/${enc(eventId)}/ballot/list`;
    const figures = [
      ['Applications', drawn.applications.toLocaleString()], ['Chances (a group is one)', drawn.tickets.toLocaleString()],
      ['Places drawn', drawn.places.toLocaleString()], ['Places won', drawn.winners.toLocaleString()],
      ['Drawn at', when(drawn.drawnAt, race.timeZone)],
    ];
    body.replaceChildren(
      h('dl', { testid: 'bal-figures' }, figures.flatMap(([dt, dd]) => [h('dt', {}, dt), h('dd', {}, dd)])),
      commitment(drawn.commitment),
      h('p', {}, 'The seed, revealed at the draw: ', wrapped(h('code', { testid: 'bal-seed' }, drawn.seed))),
      h('p', {}, `The list of applications (ids only, never an address) in ${drawn.listPages} page`
        + `${drawn.listPages === 1 ? '' : 's'}: `,
      ...Array.from({ length: Math.min(drawn.listPages, 20) }, (_, p) => [h('a', { href: `${base}?page=${p}`,
        testid: 'bal-list-page' }, `page ${p + 1}`), ' '])),
      h('p', {}, 'Anyone can check that the seed is the committed one and re-compute the winners:'),
      h('p', { testid: 'bal-verify' }, wrapped(h('code', {}, drawn.verify))),
      backLink(raceId));
  })();
}

// Long unbroken hex wraps on a phone (set through the CSSOM: the CSP allows no style attribute).
const wrapped = (el) => ((el.style.overflowWrap = 'anywhere'), el);
const commitment = (c) => h('p', {}, 'Commitment published before applications opened (SHA-256 of the seed): ',
  wrapped(h('code', { testid: 'bal-commitment' }, c)));
