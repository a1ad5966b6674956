// The live view: the race's figures every few seconds (the stats endpoint is at most two
// seconds old) and confirmations per minute for the last hour, charted with uPlot (bundled).
import uPlot from 'uplot';
import { h, show } from './dom.js';
import { money } from './races.js';
import { browserZone, timeInZone } from './zone.js';

const enc = encodeURIComponent;
const EVERY_MS = 5000;

export async function livePage(api, raceId, subnav) {
  const race = await api.get(`/races/${enc(raceId)}`);
  const totals = h('dl', { class: 'facts', 'data-testid': 'live-totals' });
  const perEvent = h('tbody', {});
  const chartBox = h('figure', { class: 'chart', 'data-testid': 'live-chart' }, h('figcaption', {}, 'Confirmations per minute, last hour (UTC)'));
  const updated = h('p', { class: 'muted', role: 'status', 'data-testid': 'live-updated' });
  // When each event sold out (kept once by the API, in the race's zone): a polite status, said
  // once when it first appears, not at every refresh.
  const zone = race.timeZone || browserZone();
  const soldOut = h('div', { class: 'banner', role: 'status', 'data-testid': 'live-sold-out', hidden: true });
  let plot = null;

  async function tick() {
    const s = await api.get(`/races/${enc(raceId)}/stats?minutes=60`);
    const t = s.totals;
    const rows = [
      ['Confirmed', t.confirmed], ['Held now', t.held], ['Paid, being written', t.queued],
      ['Places left', t.placesLeft], ['Money taken', money((t.revenueCents || 0) - (t.refundedCents || 0), race.currency)],
      ['Waiting in the opening queue', s.fairness?.queue?.length ?? '—'],
    ];
    totals.replaceChildren(...rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))]));
    perEvent.replaceChildren(...s.events.map((e) => h('tr', {},
      h('th', { scope: 'row' }, e.name), h('td', { class: 'num' }, `${e.cap - e.placesLeft} of ${e.cap}`),
      h('td', { class: 'num' }, String(e.held)), h('td', { class: 'num' }, String(e.confirmed)),
      h('td', { 'data-testid': `sold-out-${e.eventId}` }, e.soldOutAt ? timeInZone(e.soldOutAt, zone) : '—'))));
    const gone = s.events.filter((e) => e.soldOutAt);
    const said = gone.map((e) => `${e.name} sold out at ${timeInZone(e.soldOutAt, zone)}.`).join(' ');
    if (said !== soldOut.textContent) soldOut.textContent = said;
    soldOut.hidden = !gone.length;
    // One series per event plus the x axis (minutes as Unix seconds).
    const minutes = s.events[0]?.perMinute.map((m) => Date.parse(`${m.minute}:00Z`) / 1000) || [];
    const data = [minutes, ...s.events.map((e) => e.perMinute.map((m) => m.confirmed))];
    if (!plot) {
      const colours = ['#0b4f8a', '#17663a', '#8a4b00', '#b3261e', '#4f5661'];
      plot = new uPlot({
        width: Math.min(900, chartBox.clientWidth || 700),
        height: 240,
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'),
        series: [{}, ...s.events.map((e, i) => ({ label: e.name, stroke: colours[i % colours.length], width: 2 }))],
        axes: [{}, { label: 'per minute' }],
      }, data, chartBox);
    } else {
      plot.setData(data);
    }
    updated.textContent = `Updated ${new Date(s.asOf).toLocaleTimeString()}.`;
  }

  show(
    h('p', {}, h('a', { href: '#/races' }, '← Your races')),
    h('h1', {}, `Live · ${race.name}`),
    subnav(raceId, 'live'),
    updated,
    soldOut,
    totals,
    h('div', { class: 'scroll' }, h('table', { 'data-testid': 'live-events' },
      h('thead', {}, h('tr', {}, ...['Event', 'Taken', 'Held', 'Confirmed', 'Sold out at'].map((t) => h('th', { scope: 'col' }, t)))), perEvent)),
    chartBox,
  );
  await tick();
  const hash = location.hash;
  const timer = setInterval(() => {
    if (location.hash !== hash) return clearInterval(timer); // left the page
    tick().catch((err) => (updated.textContent = err.message));
  }, EVERY_MS);
}
