// An event's ballot (issue 43), for its director: the settings (the window, the draw time, the
// places kept for guaranteed entries, the winners' days to pay; times in the race's zone), fixed once
// the window opens; the commitment they publish; applications confirmed per day; after the draw, the
// revealed seed and the public page anyone checks it on.
import { announce, downloadCsv, field, h, show } from './dom.js';
import { fromZoneInput, showInZone, toZoneInput } from './zone.js';

const enc = encodeURIComponent;
const PHASE_WORDS = { NONE: 'No ballot', UPCOMING: 'Set: the window has not opened', OPEN: 'Taking applications', CLOSED: 'Closed: waiting for the draw' };

export async function ballotPage(api, raceId, subnav) {
  const path = `/races/${enc(raceId)}`;
  const race = await api.get(path);
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const chosen = race.events.find((e) => e.eventId === params.get('eventId')) || race.events[0];
  const zone = race.timeZone;
  const ballotPath = `${path}/events/${enc(chosen.eventId)}/ballot`;

  const status = h('div', { role: 'status', 'data-testid': 'bal-admin-status', tabIndex: -1 });
  const alert = h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': 'bal-admin-alert' });
  const figures = h('dl', { class: 'facts', 'data-testid': 'bal-figures' });
  const days = h('tbody', {});
  const drawn = h('div', { 'data-testid': 'bal-drawn' });

  const hint = `In the race's zone (${zone}).`;
  const opens = field({ id: 'bal-opensAt', label: 'Applications open', type: 'datetime-local', hint, required: true });
  const closes = field({ id: 'bal-closesAt', label: 'Applications close', type: 'datetime-local', hint, required: true });
  const draws = field({ id: 'bal-drawAt', label: 'Draw time', type: 'datetime-local', hint: 'At or after the close, before race day.', required: true });
  const kept = field({ id: 'bal-keptPlaces', label: 'Places kept out of the draw', type: 'number', min: 0, inputMode: 'numeric',
    hint: 'For guaranteed entries (charity, qualifiers, deferrals), given with codes or the admin API.' });
  const pay = field({ id: 'bal-payDays', label: "Winners' days to pay", type: 'number', min: 1, max: 14, inputMode: 'numeric' });
  const inputs = { opensAt: opens, closesAt: closes, drawAt: draws, keptPlaces: kept, payDays: pay };
  const save = h('button', { type: 'submit', class: 'primary', 'data-testid': 'bal-save' }, 'Save the ballot');
  const settings = h('form', { noValidate: true, 'data-testid': 'bal-settings' },
    h('div', { class: 'grid' }, opens, closes, draws, kept, pay), save);

  function said(message) {
    alert.hidden = true;
    status.textContent = message;
    announce(message);
    status.focus();
  }

  function fill(view) {
    const s = view.settings;
    opens.input.value = s.opensAt ? toZoneInput(s.opensAt, zone) : '';
    closes.input.value = s.closesAt ? toZoneInput(s.closesAt, zone) : '';
    draws.input.value = s.drawAt ? toZoneInput(s.drawAt, zone) : '';
    kept.input.value = s.keptPlaces ?? 0;
    pay.input.value = s.payDays ?? 7;
    const fixed = view.phase === 'OPEN' || view.phase === 'CLOSED';
    for (const f of Object.values(inputs)) f.input.disabled = fixed;
    save.disabled = fixed;
    const facts = [
      ['State', PHASE_WORDS[view.phase] || view.phase], ['Places drawn', view.places],
      ['Applications confirmed', view.confirmed], ['Withdrawn', view.withdrawn],
      ['Commitment (SHA-256 of the seed)', s.commitment || '— (set on the first save)'],
    ];
    figures.replaceChildren(...facts.flatMap(([k, v], i) => [h('dt', {}, k), h('dd', { 'data-testid': `bal-fig-${i}` }, String(v))]));
    days.replaceChildren(...view.byDay.map((d) => h('tr', {}, h('th', { scope: 'row' }, d.day), h('td', { class: 'num' }, String(d.applications)))));
  }

  async function load() {
    const view = await api.get(ballotPath);
    fill(view);
    drawn.replaceChildren();
    if (view.phase === 'CLOSED') {
      // The public draw, once it ran: the same document runners check it with.
      const res = await fetch(`/api/races/${enc(raceId)}/events/${enc(chosen.eventId)}/ballot/draw`);
      if (res.ok) {
        const d = await res.json();
        drawn.replaceChildren(h('p', { 'data-testid': 'bal-admin-seed' }, `Drawn ${showInZone(d.drawnAt, zone)}: ${d.winners} places won by ${d.winningTickets} of ${d.tickets} chances. Seed: `, h('code', {}, d.seed)),
          h('p', {}, h('a', { href: `/#/ballot/draw/${enc(raceId)}/${enc(chosen.eventId)}` }, 'The public page of the draw (how anyone checks it)')));
      } else drawn.replaceChildren(h('p', {}, `Not drawn yet: the draw is at ${showInZone(view.settings.drawAt, zone)}.`));
    }
  }

  settings.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    for (const f of Object.values(inputs)) f.setError('');
    const body = {
      opensAt: fromZoneInput(opens.input.value, zone), closesAt: fromZoneInput(closes.input.value, zone),
      drawAt: fromZoneInput(draws.input.value, zone), keptPlaces: Number(kept.input.value || 0), payDays: Number(pay.input.value || 7),
    };
    const missing = ['opensAt', 'closesAt', 'drawAt'].filter((k) => !body[k]);
    for (const k of missing) inputs[k].setError('Give a date and time.');
    if (missing.length) return inputs[missing[0]].input.focus();
    save.disabled = true;
    try {
      fill(await api.put(ballotPath, body));
      said(`${chosen.name}: the ballot is saved; its commitment is on the race page.`);
    } catch (err) {
      const wrong = Object.entries(err.fields || {}).filter(([k]) => inputs[k]);
      for (const [k, msg] of wrong) inputs[k].setError(msg);
      alert.textContent = err.message;
      alert.hidden = false;
      (wrong.length ? inputs[wrong[0][0]].input : alert).focus();
      save.disabled = false;
    }
  });

  const picker = h('select', { id: 'bal-event', name: 'eventId' },
    race.events.map((e) => h('option', { value: e.eventId, selected: e.eventId === chosen.eventId }, e.name)));
  picker.addEventListener('change', () => {
    location.hash = `#/races/${enc(raceId)}/ballot?eventId=${enc(picker.value)}`;
  });

  const exportBox = h('p', { role: 'status' });
  const download = h('button', { type: 'button', 'data-testid': 'bal-export' }, 'Download the applications (CSV)');
  download.addEventListener('click', async () => {
    exportBox.textContent = 'Preparing the export…';
    try {
      await downloadCsv(api, `${ballotPath}/export`, `${raceId}-${chosen.eventId}-ballot.csv`);
      exportBox.textContent = 'The export is downloaded.';
    } catch (err) {
      exportBox.textContent = err.message;
    }
  });

  show(
    h('p', {}, h('a', { href: '#/races' }, '← Your races')),
    h('h1', {}, `Ballot · ${race.name}`),
    subnav(raceId, 'ballot'),
    h('div', { class: 'field' }, h('label', { htmlFor: 'bal-event' }, 'Event'), picker),
    alert, status,
    h('section', { 'aria-labelledby': 'bal-figures-heading' }, h('h2', { id: 'bal-figures-heading' }, chosen.name), figures, drawn),
    h('section', { 'aria-labelledby': 'bal-settings-heading' }, h('h2', { id: 'bal-settings-heading' }, 'Settings'),
      h('p', { class: 'note' }, 'Places are then drawn from applications, not held first-come. The settings are fixed once the window opens: applicants were told them.'),
      settings),
    h('section', { 'aria-labelledby': 'bal-days-heading' }, h('h2', { id: 'bal-days-heading' }, 'Applications confirmed per day'),
      h('div', { class: 'scroll' }, h('table', { 'data-testid': 'bal-days' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Day'), h('th', { scope: 'col' }, 'Applications'))), days))),
    h('section', { 'aria-labelledby': 'bal-export-heading' }, h('h2', { id: 'bal-export-heading' }, 'Every application'),
      h('p', {}, 'One row per application, whatever its state, with its group.'), h('div', { class: 'row' }, download, exportBox)),
  );
  await load();
}
