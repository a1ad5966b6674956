// The live view: the opening second by second (GET …/pulse: what the handlers counted, from Redis
// while it holds it, from the durable copy after) and the race's figures (GET …/stats, at most two
// seconds old). Charts are uPlot (bundled), every time in the race's zone, with a table as their
// text alternative; a span nobody can vouch for is a gap in the chart, never a zero. After the
// opening, the same view replays any span from the stored counts and downloads it as CSV.
import uPlot from 'uplot';
import { downloadCsv, h, show } from './dom.js';
import { money } from './races.js';
import { browserZone, fromZoneInput, timeInZone, toZoneInput } from './zone.js';

const enc = encodeURIComponent;
const STATS_MS = 5000;
const PULSE_MS = 2000;
const LIVE_SPAN_S = 600; // the live charts show the last ten minutes
const LATE_S = 5; // a handler flushes as its invocation ends: the last seconds are read again
const MAX_SPAN_S = 6 * 3600; // the API's longest span per call
const TABLE_ROWS = 300;
const LABELS = {
  holds: 'Places held', soldOut: 'Sold-out answers', queued: 'Paid, queued', free: 'Free entries queued',
  confirmed: 'Confirmed', declined: 'Card declines', threeDS: '3-D Secure steps',
  providerBusy: 'Payment provider busy', throttled: 'Our 429s', failed: 'Our 5xx',
};
const CHARTED = ['holds', 'confirmed', 'soldOut', 'declined', 'throttled', 'failed'];
const COLOURS = ['#0b4f8a', '#17663a', '#8a4b00', '#b3261e', '#6b3fa0', '#4f5661'];

/** The counts of the seconds read so far, merged read by read (a re-read span replaces its own). */
export class Seconds {
  constructor() { this.by = new Map(); this.gaps = []; }

  merge(view) {
    for (const t of [...this.by.keys()]) if (t >= view.start && t < view.end) this.by.delete(t);
    for (const c of view.counts) {
      const row = this.by.get(c.t) || {};
      row[c.name] = (row[c.name] || 0) + c.n;
      row[`${c.eventId}|${c.name}`] = (row[`${c.eventId}|${c.name}`] || 0) + c.n;
      this.by.set(c.t, row);
    }
    this.gaps = [...this.gaps.filter((g) => g.end <= view.start || g.start >= view.end), ...view.gaps];
  }

  inGap(t) { return this.gaps.some((g) => g.start <= t && t < g.end); }

  /** Per second from `start` to `end` (exclusive): `name`'s count, null inside a gap. */
  series(start, end, name) {
    const out = [];
    for (let t = start; t < end; t += 1) out.push(this.inGap(t) ? null : (this.by.get(t)?.[name] || 0));
    return out;
  }

  sum(start, end, name) {
    let n = 0;
    for (const [t, row] of this.by) if (t >= start && t < end) n += row[name] || 0;
    return n;
  }
}

export async function livePage(api, raceId, subnav) {
  const race = await api.get(`/races/${enc(raceId)}`);
  const zone = race.timeZone || browserZone();
  const seconds = new Seconds();
  const mode = { live: true, start: 0, end: 0 };
  let stats = null;
  let plots = [];

  const big = h('div', { class: 'bignums', 'data-testid': 'live-big' });
  const totals = h('dl', { class: 'facts', 'data-testid': 'live-totals' });
  const perEvent = h('tbody', {});
  const updated = h('p', { class: 'muted', role: 'status', 'data-testid': 'live-updated' });
  const soldOut = h('div', { class: 'banner', role: 'status', 'data-testid': 'live-sold-out', hidden: true });
  const errors = h('div', { class: 'banner warn', role: 'status', 'data-testid': 'live-errors', hidden: true });
  const perSecond = h('figure', { class: 'chart', 'data-testid': 'live-chart' });
  const sold = h('figure', { class: 'chart', 'data-testid': 'live-sold-chart' });
  const tableHead = h('thead', {});
  const tableBody = h('tbody', { 'data-testid': 'live-seconds' });
  const tableNote = h('p', { class: 'muted' });
  const from = h('input', { type: 'datetime-local', id: 'replay-from' });
  const to = h('input', { type: 'datetime-local', id: 'replay-to' });
  const opened = race.registrationOpensAt || new Date().toISOString();
  from.value = toZoneInput(opened, zone);
  to.value = toZoneInput(new Date(Date.parse(opened) + 3600e3).toISOString(), zone);
  const modeNote = h('p', { 'data-testid': 'live-mode' });

  function timeOf(t) { return timeInZone(new Date(t * 1000).toISOString(), zone); }

  function drawCharts() {
    const { start, end } = mode;
    const xs = [];
    for (let t = start; t < end; t += 1) xs.push(t);
    const width = Math.min(900, perSecond.clientWidth || 700);
    const tzDate = (ts) => uPlot.tzDate(new Date(ts * 1e3), zone);
    const counts = [xs, ...CHARTED.map((n) => seconds.series(start, end, n))];
    // The cumulative sold line per event: anchored on the stats' confirmed while live (what was
    // confirmed before the span counts too), from zero in a replay of a span.
    const events = stats?.events || [];
    const soldData = [xs];
    for (const e of events) {
      const per = seconds.series(start, end, `${e.eventId}|confirmed`);
      const inSpan = per.reduce((a, b) => a + (b || 0), 0);
      let running = mode.live ? Math.max(0, e.confirmed - inSpan) : 0;
      soldData.push(per.map((n) => (running += n || 0)));
      soldData.push(xs.map(() => e.cap));
    }
    if (plots.length && plots[0].data[0].length === xs.length && plots[1].series.length === soldData.length) {
      plots[0].setData(counts);
      plots[1].setData(soldData);
      return;
    }
    plots.forEach((p) => p.destroy());
    perSecond.replaceChildren(h('figcaption', {}, `Per second (${zone})`));
    sold.replaceChildren(h('figcaption', {}, `Confirmed so far, against each event's cap (${zone})`));
    plots = [
      new uPlot({
        width, height: 240, tzDate,
        series: [{}, ...CHARTED.map((n, i) => ({ label: LABELS[n], stroke: COLOURS[i], width: 1.5, spanGaps: false }))],
        axes: [{}, { label: 'per second' }],
      }, counts, perSecond),
      new uPlot({
        width, height: 240, tzDate,
        series: [{}, ...events.flatMap((e, i) => [
          { label: e.name, stroke: COLOURS[i % COLOURS.length], width: 2 },
          { label: `${e.name} cap`, stroke: COLOURS[i % COLOURS.length], dash: [6, 4], width: 1 },
        ])],
        axes: [{}, { label: 'places' }],
      }, soldData, sold),
    ];
  }

  function drawTable() {
    // Every count of the race, then each event's confirmed: the sold line's own figures.
    const columns = [...Object.entries(LABELS), ...(stats?.events || []).map((e) => [`${e.eventId}|confirmed`, `Confirmed · ${e.name}`])];
    tableHead.replaceChildren(h('tr', {}, h('th', { scope: 'col' }, 'Second'), ...columns.map(([, t]) => h('th', { scope: 'col' }, t))));
    const rows = [...seconds.by.keys()].filter((t) => t >= mode.start && t < mode.end).sort((a, b) => b - a);
    tableBody.replaceChildren(...rows.slice(0, TABLE_ROWS).map((t) => h('tr', {},
      h('th', { scope: 'row' }, timeOf(t)),
      ...columns.map(([n]) => h('td', { class: 'num', 'data-count': n }, String(seconds.by.get(t)[n] || 0))))));
    const gaps = seconds.gaps.filter((g) => g.end > mode.start && g.start < mode.end);
    tableNote.textContent = [
      rows.length > TABLE_ROWS ? `The newest ${TABLE_ROWS} of ${rows.length} seconds with counts; the CSV has them all.` : '',
      ...gaps.map((g) => `No counts can be vouched for from ${timeOf(g.start)} to ${timeOf(g.end)} (a gap, not zeros).`),
    ].join(' ');
  }

  function drawBanners() {
    const now = mode.end;
    const failed = seconds.sum(now - 10, now, 'failed');
    const throttled = seconds.sum(now - 10, now, 'throttled');
    const said = mode.live && (failed > 0 || throttled >= 20)
      ? `Errors are rising: ${failed} server errors and ${throttled} answers of 429 in the last 10 seconds.` : '';
    if (said !== errors.textContent) errors.textContent = said;
    errors.hidden = !said;
  }

  async function readPulse() {
    if (mode.live) {
      // Up to now (the API's end), from a few seconds back: their late flushes land there.
      const view = await api.get(`/races/${enc(raceId)}/pulse?start=${Math.max(mode.start, mode.end - LATE_S)}`);
      seconds.merge(view);
      Object.assign(mode, { start: view.end - LIVE_SPAN_S, end: view.end });
    } else {
      for (let a = mode.start; a < mode.end; a += MAX_SPAN_S) {
        seconds.merge(await api.get(`/races/${enc(raceId)}/pulse?start=${a}&end=${Math.min(mode.end, a + MAX_SPAN_S)}`));
      }
    }
    drawCharts();
    drawTable();
    drawBanners();
  }

  async function readStats() {
    stats = await api.get(`/races/${enc(raceId)}/stats?minutes=1`);
    const t = stats.totals;
    const q = stats.fairness?.queue;
    big.replaceChildren(...[
      ['left', 'Places left', t.placesLeft], ['confirmed', 'Confirmed', t.confirmed],
      ['queue', 'Waiting in the opening queue', q?.length ?? '—'], ['serving', 'Now serving', q?.admitted ?? '—'],
    ].map(([id, k, v]) => h('p', {}, h('strong', { 'data-testid': `big-${id}` }, String(v)), h('span', {}, k))));
    totals.replaceChildren(...[
      ['Held now', t.held], ['Paid, being written', t.queued],
      ['Money taken', money((t.revenueCents || 0) - (t.refundedCents || 0), race.currency)],
    ].flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))]));
    perEvent.replaceChildren(...stats.events.map((e) => h('tr', {},
      h('th', { scope: 'row' }, e.name), h('td', { class: 'num' }, `${e.cap - e.placesLeft} of ${e.cap}`),
      h('td', { class: 'num' }, String(e.held)), h('td', { class: 'num' }, String(e.confirmed)),
      h('td', { 'data-testid': `sold-out-${e.eventId}` }, e.soldOutAt ? timeInZone(e.soldOutAt, zone) : '—'))));
    const gone = stats.events.filter((e) => e.soldOutAt);
    const said = gone.map((e) => `${e.name} sold out at ${timeInZone(e.soldOutAt, zone)}.`).join(' ');
    if (said !== soldOut.textContent) soldOut.textContent = said;
    soldOut.hidden = !gone.length;
    updated.textContent = `Updated ${timeInZone(stats.asOf, zone)}.`;
  }

  function goLive() {
    const now = Math.floor(Date.now() / 1000);
    Object.assign(mode, { live: true, start: now - LIVE_SPAN_S, end: now - LIVE_SPAN_S });
    modeNote.textContent = 'Live: the last ten minutes, every two seconds.';
  }

  async function replay(event) {
    event.preventDefault();
    const a = Math.floor(Date.parse(fromZoneInput(from.value, zone)) / 1000);
    const b = Math.floor(Date.parse(fromZoneInput(to.value, zone)) / 1000);
    if (!(a < b)) {
      modeNote.textContent = 'Choose a start before the end.';
      return;
    }
    Object.assign(mode, { live: false, start: a, end: b });
    modeNote.textContent = `Replay from ${timeOf(a)} to ${timeOf(b)}, from the stored counts.`;
    await readPulse();
  }

  const csv = h('button', { type: 'button', 'data-testid': 'live-csv' }, 'Download these seconds as CSV');
  csv.addEventListener('click', () => downloadCsv(api, `/races/${enc(raceId)}/pulse/csv?start=${mode.start}&end=${mode.end}`,
    `${raceId}-pulse-${mode.start}.csv`));
  const back = h('button', { type: 'button', 'data-testid': 'live-back' }, 'Back to live');
  back.addEventListener('click', () => { goLive(); readPulse().catch((err) => (updated.textContent = err.message)); });
  const replayForm = h('form', { class: 'inline', 'data-testid': 'replay-form' },
    h('label', { for: 'replay-from' }, `From (${zone})`), from,
    h('label', { for: 'replay-to' }, `To (${zone})`), to,
    h('button', { type: 'submit' }, 'Replay'), back, csv);
  replayForm.addEventListener('submit', (e) => replay(e).catch((err) => (modeNote.textContent = err.message)));

  show(
    h('p', {}, h('a', { href: '#/races' }, '← Your races')),
    h('h1', {}, `Live · ${race.name}`),
    subnav(raceId, 'live'),
    updated, soldOut, errors, big, totals,
    h('div', { class: 'scroll' }, h('table', { 'data-testid': 'live-events' },
      h('thead', {}, h('tr', {}, ...['Event', 'Taken', 'Held', 'Confirmed', 'Sold out at'].map((t) => h('th', { scope: 'col' }, t)))), perEvent)),
    replayForm, modeNote, perSecond, sold,
    h('div', { class: 'scroll' }, h('table', { 'data-testid': 'live-seconds-table' },
      h('caption', {}, `Second by second, newest first (${zone}): the charts as a table`),
      tableHead, tableBody)),
    tableNote,
  );
  goLive();
  await readStats();
  await readPulse();
  const hash = location.hash;
  const timers = [
    setInterval(() => (mode.live ? readPulse() : Promise.resolve()).catch((err) => (updated.textContent = err.message)), PULSE_MS),
    setInterval(() => readStats().catch((err) => (updated.textContent = err.message)), STATS_MS),
  ];
  const stop = setInterval(() => {
    if (location.hash === hash) return;
    timers.concat(stop).forEach(clearInterval); // left the page
    plots.forEach((p) => p.destroy());
  }, 500);
}
