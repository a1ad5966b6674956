// The director's races: name, date, state, and whether the runner site shows them.
import { h, show } from './dom.js';

const STATE_LABEL = { upcoming: 'Scheduled', open: 'Open', soldout: 'Sold out', closed: 'Closed' };

function stateOf(race) {
  if (!race.published) return ['draft', 'Draft'];
  return [race.status, STATE_LABEL[race.status] || race.status];
}

export async function racesPage(api) {
  const { races } = await api.get('/races');
  const rows = races.map((race) => {
    const [cls, label] = stateOf(race);
    return h('tr', { 'data-testid': 'race-row', dataset: { raceId: race.raceId } },
      h('th', { scope: 'row' }, h('a', { href: `#/races/${encodeURIComponent(race.raceId)}` }, race.name)),
      h('td', {}, race.raceDate),
      h('td', {}, h('span', { class: `state ${cls}`, 'data-testid': 'race-state' }, label)),
    );
  });
  show(
    h('h1', {}, 'Your races'),
    races.length
      ? h('table', { 'data-testid': 'races' },
          h('caption', { class: 'visually-hidden' }, 'Your races'),
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Race'), h('th', { scope: 'col' }, 'Date'), h('th', { scope: 'col' }, 'State'))),
          h('tbody', {}, rows))
      : h('p', { 'data-testid': 'no-races' }, 'You have no races yet.'),
  );
}
