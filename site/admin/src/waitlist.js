// An event's waitlist (issue 40), for its director: the figures, the list with each runner's
// place and state, and the three things a director does to it: release places to the line,
// remove someone, close the list. Each change that cannot be undone asks first, the focus going
// to the button that does it (and back where it was on "no"), so it works by keyboard alone.
// Every list of the race downloads as one CSV.
import { announce, downloadCsv, h, show } from './dom.js';
import { showInZone } from './zone.js';

const enc = encodeURIComponent;

const STATE_WORDS = {
  WAITING: 'Waiting',
  OFFERED: 'Offered a place',
  PENDING: 'To confirm their address',
  LEFT: 'Left',
  REMOVED: 'Removed',
};

// "Are you sure?" beside the button that asked: `yes` runs the change; either answer puts the
// focus somewhere sensible (the answer's own message, or back on the button).
function ask(slot, opener, { question, yesLabel, testid, yes }) {
  const no = h('button', { type: 'button', 'data-testid': `${testid}-no` }, 'No');
  const go = h('button', { type: 'button', class: 'primary danger', 'data-testid': `${testid}-yes` }, yesLabel);
  const box = h('div', { class: 'panel', role: 'group', 'aria-label': question, 'data-testid': `${testid}-ask` },
    h('p', {}, question), h('div', { class: 'row' }, go, no));
  no.addEventListener('click', () => {
    box.remove();
    opener.focus();
  });
  go.addEventListener('click', async () => {
    go.disabled = no.disabled = true;
    try {
      await yes();
      box.remove();
    } finally {
      go.disabled = no.disabled = false;
    }
  });
  slot.replaceChildren(box);
  go.focus();
}

export async function waitlistPage(api, raceId, subnav) {
  const path = `/races/${enc(raceId)}`;
  const race = await api.get(path);
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const withList = race.events.filter((e) => e.waitlist?.enabled);
  const chosen = race.events.find((e) => e.eventId === params.get('eventId')) || withList[0] || race.events[0];
  const when = (iso) => (iso ? showInZone(iso, race.timeZone) : '—');

  const status = h('div', { role: 'status', 'data-testid': 'wl-admin-status', tabIndex: -1 });
  const alert = h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': 'wl-admin-alert' });
  const figures = h('dl', { class: 'facts', 'data-testid': 'wl-figures' });
  const rows = h('tbody', {});
  const empty = h('p', { 'data-testid': 'wl-empty', hidden: true }, 'Nobody has joined this list yet.');
  const closeSlot = h('div', {});
  const closeButton = h('button', { type: 'button', 'data-testid': 'wl-close' }, 'Close the list…');

  function said(message) {
    alert.hidden = true;
    status.textContent = message;
    announce(message);
    status.focus();
  }
  function failed(err) {
    alert.textContent = err.message;
    alert.hidden = false;
    alert.focus();
  }

  async function load() {
    const view = await api.get(`${path}/events/${enc(chosen.eventId)}/waitlist`);
    const facts = [
      ['The list', view.closed ? 'Closed' : view.settings.enabled ? 'Open' : 'Off'],
      ['Waiting', view.length], ['Places kept for the line', view.pooled], ['Offers out', view.offersOut],
      ['Offers made', view.offersMade], ['Accepted', view.accepted], ['Expired', view.expired], ['Declined', view.declined],
    ];
    figures.replaceChildren(...facts.flatMap(([k, v]) => [h('dt', {}, k),
      h('dd', { 'data-testid': `wl-fig-${k.toLowerCase().replace(/ /g, '-')}` }, String(v))]));
    rows.replaceChildren(...view.entries.map(row));
    empty.hidden = view.entries.length > 0;
    closeButton.disabled = view.closed;
    return view;
  }

  function row(e) {
    const name = `${e.firstName} ${e.lastName}`.trim() || '(left: their details are deleted)';
    const slot = h('div', {});
    const removable = !['LEFT', 'REMOVED'].includes(e.state);
    const remove = removable ? h('button', { type: 'button', 'data-testid': 'wl-remove' }, `Remove ${name}…`) : null;
    remove?.addEventListener('click', () => ask(slot, remove, {
      question: `Remove ${name} from the list? Their address cannot join this list again.`,
      yesLabel: 'Yes, remove',
      testid: 'wl-remove',
      yes: async () => {
        try {
          await api.delete(`${path}/events/${enc(chosen.eventId)}/waitlist/entries/${enc(e.entryId)}`);
          await load();
          said(`${name} is removed from the list.`);
        } catch (err) {
          failed(err);
        }
      },
    }));
    return h('tr', { 'data-testid': 'wl-entry', dataset: { entryId: e.entryId, state: e.state } },
      h('td', { class: 'num', 'data-testid': 'wl-entry-position' }, e.position ?? '—'),
      h('td', { class: 'num' }, e.number ?? '—'),
      h('th', { scope: 'row' }, name), h('td', {}, e.email || '—'),
      h('td', { 'data-testid': 'wl-entry-state' }, STATE_WORDS[e.state] || e.state),
      h('td', {}, when(e.confirmedAt || e.joinedAt)),
      h('td', {}, remove, slot));
  }

  // Release N places: the event's cap goes up, and the line is offered them first.
  const places = h('input', { id: 'wl-release-places', 'data-testid': 'wl-release-places', name: 'places', type: 'number', min: 1, max: 10000, required: true,
    inputMode: 'numeric', 'aria-describedby': 'wl-release-places-hint wl-release-places-error' });
  const placesError = h('p', { id: 'wl-release-places-error', class: 'error', hidden: true, 'data-testid': 'wl-release-places-error' });
  const release = h('form', { noValidate: true, 'data-testid': 'wl-release' },
    h('div', { class: 'field' }, h('label', { htmlFor: 'wl-release-places' }, 'Places to release'),
      h('p', { class: 'hint', id: 'wl-release-places-hint' }, "The event's cap goes up by this many; the runners in line are offered them first, in order."),
      places, placesError),
    h('button', { type: 'submit', class: 'primary', 'data-testid': 'wl-release-submit' }, 'Release places'));
  release.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const typed = places.value.trim();
    const n = /^\d+$/.test(typed) ? Number(typed) : NaN;
    placesError.hidden = n >= 1 && n <= 10000;
    placesError.textContent = placesError.hidden ? '' : 'A whole number of places, from 1 to 10,000.';
    places.setAttribute('aria-invalid', placesError.hidden ? 'false' : 'true');
    if (!placesError.hidden) return places.focus();
    try {
      await api.post(`${path}/events/${enc(chosen.eventId)}/waitlist/release`, { places: n });
      release.reset();
      await load();
      said(`${n} place${n === 1 ? '' : 's'} released: the runners in line are offered ${n === 1 ? 'it' : 'them'} first.`);
    } catch (err) {
      failed(err);
    }
  });

  closeButton.addEventListener('click', () => ask(closeSlot, closeButton, {
    question: 'Close the list? Offers not yet taken end and their places go on sale, and every runner still waiting gets an email saying the list has closed.',
    yesLabel: 'Yes, close the list',
    testid: 'wl-close',
    yes: async () => {
      try {
        await api.post(`${path}/events/${enc(chosen.eventId)}/waitlist/close`);
        await load();
        said('The list is closed; the runners waiting are told by email.');
      } catch (err) {
        failed(err);
      }
    },
  }));

  const picker = h('select', { id: 'wl-event', name: 'eventId' },
    race.events.map((e) => h('option', { value: e.eventId, selected: e.eventId === chosen.eventId },
      `${e.name}${e.waitlist?.enabled ? '' : ' (no waitlist)'}`)));
  picker.addEventListener('change', () => {
    location.hash = `#/races/${enc(raceId)}/waitlist?eventId=${enc(picker.value)}`;
  });
  const exportBox = h('p', { role: 'status' });
  const download = h('button', { type: 'button', 'data-testid': 'wl-export' }, 'Download the waitlists (CSV)');
  download.addEventListener('click', async () => {
    exportBox.textContent = 'Preparing the export…';
    try {
      await downloadCsv(api, `${path}/waitlist/export`, `${raceId}-waitlist.csv`);
      exportBox.textContent = 'The export is downloaded.';
    } catch (err) {
      exportBox.textContent = err.message;
    }
  });

  show(
    h('p', {}, h('a', { href: '#/races' }, '← Your races')),
    h('h1', {}, `Waitlist · ${race.name}`),
    subnav(raceId, 'waitlist'),
    h('div', { class: 'field' }, h('label', { htmlFor: 'wl-event' }, 'Event'), picker),
    withList.length ? null : h('p', { class: 'note' }, "No event has a waitlist: switch one on in the event's settings."),
    alert, status,
    h('section', { 'aria-labelledby': 'wl-figures-heading' }, h('h2', { id: 'wl-figures-heading' }, chosen.name), figures),
    h('section', { 'aria-labelledby': 'wl-list-heading' }, h('h2', { id: 'wl-list-heading' }, 'The list'),
      h('div', { class: 'scroll' }, h('table', { 'data-testid': 'wl-entries' },
        h('thead', {}, h('tr', {}, ...['Place', 'Number', 'Name', 'Email', 'State', 'Joined', 'Remove'].map((t) => h('th', { scope: 'col' }, t)))), rows)),
      empty),
    h('section', { 'aria-labelledby': 'wl-release-heading' }, h('h2', { id: 'wl-release-heading' }, 'Release places to the list'), release),
    h('section', { 'aria-labelledby': 'wl-close-heading' }, h('h2', { id: 'wl-close-heading' }, 'Close the list'),
      h('p', {}, 'Closing ends the offers not yet taken; the places kept for the line go back on sale.'), closeButton, closeSlot),
    h('section', { 'aria-labelledby': 'wl-export-heading' }, h('h2', { id: 'wl-export-heading' }, 'Every list of the race'),
      h('p', {}, 'One row per runner: their place, state and offer.'), h('div', { class: 'row' }, download, exportBox)),
  );
  await load();
}
