// Results (paper §6.2): #/races/{raceId}/events/{eventId}/results[?page=&gender=&ageGroup=]
// and a runner's result, #/races/{raceId}/events/{eventId}/results/{bib}.
// The race's small "current version" answer is read first; every other request names
// that version, so the edge can keep it for a day and a page never mixes two versions.
import { api } from './api.js';
import { backLink, enc, errorBox, go, h, page, retitle, say } from './ui.js';

const SIZE = 10;

async function current(raceId, eventId, signal) {
  const { data } = await api('GET', `/races/${enc(raceId)}/results`, { signal });
  const ev = (data.events || []).find((e) => e.eventId === eventId);
  return { race: data, ev, version: ev && ev.published ? ev.version : null };
}

const base = (raceId, eventId, v) => `/races/${enc(raceId)}/events/${enc(eventId)}/results/${v}`;
const place = (n) => (n == null ? '–' : String(n));

function query() {
  const q = location.hash.split('?')[1] || '';
  return new URLSearchParams(q);
}

function notPublished(body, raceId) {
  body.replaceChildren(h('p', { testid: 'results-unpublished' }, 'Results for this event are not published yet.'),
    backLink(raceId));
}

export async function resultsPage(raceId, eventId) {
  const { h1, body, signal } = page('Results');
  body.append(h('p', { cls: 'loading', testid: 'loading' }, 'Loading results…'));
  const q = query();
  const pageNo = Math.max(1, Number(q.get('page')) || 1);
  const gender = q.get('gender') || '';
  const group = q.get('ageGroup') || '';
  let cur;
  let data;
  try {
    cur = await current(raceId, eventId, signal);
    if (cur.version == null) return notPublished(body, raceId);
    const params = new URLSearchParams({ page: pageNo, size: SIZE });
    if (gender) params.set('gender', gender);
    if (group) params.set('ageGroup', group);
    data = (await api('GET', `${base(raceId, eventId, cur.version)}?${params}`, { signal })).data;
  } catch (e) {
    if (!signal.aborted) body.replaceChildren(errorBox(e.message, () => resultsPage(raceId, eventId)), backLink(raceId));
    return;
  }
  retitle(h1, `${data.eventName} results`);
  const link = (over) => {
    const p = new URLSearchParams({ page: pageNo, gender, ageGroup: group, ...over });
    for (const [k, v] of [...p]) if (!v || (k === 'page' && v === '1')) p.delete(k);
    const s = p.toString();
    return `/races/${enc(raceId)}/events/${enc(eventId)}/results${s ? `?${s}` : ''}`;
  };
  const select = (label, id, values, value, key) => {
    const el = h('select', { id, testid: id },
      h('option', { value: '' }, 'All'), values.map((v) => h('option', { value: v, selected: v === value }, v)));
    el.addEventListener('change', () => go(link({ [key]: el.value, page: '1' })));
    return h('div', { cls: 'field' }, h('label', { for: id }, label), el);
  };
  const rows = data.results.map((r) => h('tr', { testid: 'result-row', 'data-bib': r.bib },
    h('td', {}, place(r.place)),
    h('td', {}, h('a', { href: `#/races/${enc(raceId)}/events/${enc(eventId)}/results/${r.bib}` }, r.name)),
    h('td', {}, String(r.bib)), h('td', {}, r.gender || ''), h('td', {}, place(r.genderPlace)),
    h('td', {}, r.ageGroup || ''), h('td', {}, place(r.ageGroupPlace)),
    h('td', {}, r.status === 'FINISHED' ? r.chipTime || '' : r.status)));
  const pager = h('nav', { cls: 'row', 'aria-label': 'Pages', testid: 'pager' },
    pageNo > 1 ? h('a', { href: `#${link({ page: String(pageNo - 1) })}`, testid: 'prev-page' }, 'Previous') : '',
    h('span', { testid: 'page-of' }, `Page ${data.page} of ${data.pages}`),
    pageNo < data.pages ? h('a', { href: `#${link({ page: String(pageNo + 1) })}`, testid: 'next-page' }, 'Next') : '');
  const teams = h('div', { cls: 'scroll' });
  body.replaceChildren(
    searchBox(raceId, eventId, cur.version, signal),
    h('div', { cls: 'row' },
      data.genders.length ? select('Gender', 'gender-filter', data.genders, gender, 'gender') : '',
      select('Age group', 'age-filter', data.ageGroups, group, 'ageGroup')),
    h('p', { cls: 'muted', testid: 'results-count' }, `${data.total} runner${data.total === 1 ? '' : 's'}`),
    h('div', { cls: 'scroll' }, h('table', { testid: 'results-table' },
      h('caption', { cls: 'visually-hidden' }, `${data.eventName} results, page ${data.page}`),
      h('thead', {}, h('tr', {}, ['Place', 'Name', 'Bib', 'Gender', 'G. place', 'Age group', 'AG place', 'Time']
        .map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows))),
    pager, teams, backLink(raceId));
  // Team standings, for an event with team entries (none: nothing shown).
  api('GET', `${base(raceId, eventId, cur.version)}/teams`, { signal }).then(({ data: t }) => t.teams.length &&
    teams.replaceChildren(h('h2', {}, `Teams (best ${t.teamScoring} times)`), h('table', { testid: 'team-standings' },
      h('thead', {}, h('tr', {}, ['Place', 'Team', 'Total', 'Counted'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, t.teams.map((r) => h('tr', { testid: 'team-row' }, h('td', {}, place(r.place)),
        h('td', {}, r.team), h('td', {}, r.total || '–'),
        h('td', {}, r.members.filter((m) => m.scored).map((m) => `${m.name} ${m.time}`).join(', '))))))), () => {});
}

// The search box: a combobox (ARIA 1.2) — one request per keystroke from the second
// character, stale answers dropped; arrows move through the suggestions, Enter opens one,
// Escape closes the list.
function searchBox(raceId, eventId, version, signal) {
  const input = h('input', {
    id: 'runner-search', type: 'text', role: 'combobox', autocomplete: 'off', spellcheck: 'false',
    'aria-autocomplete': 'list', 'aria-expanded': 'false', 'aria-controls': 'runner-suggestions',
    testid: 'runner-search',
  });
  const list = h('ul', { id: 'runner-suggestions', role: 'listbox', cls: 'suggestions', testid: 'suggestions',
    'aria-label': 'Runners' });
  list.hidden = true;
  let items = [];
  let active = -1;
  let asked = 0;
  const open = (bib) => go(`/races/${enc(raceId)}/events/${enc(eventId)}/results/${bib}`);
  const close = () => {
    list.hidden = true;
    input.setAttribute('aria-expanded', 'false');
    input.removeAttribute('aria-activedescendant');
    active = -1;
  };
  const mark = (i) => {
    active = i;
    items.forEach((li, n) => li.setAttribute('aria-selected', String(n === i)));
    if (i < 0) input.removeAttribute('aria-activedescendant');
    else input.setAttribute('aria-activedescendant', items[i].id);
  };
  input.addEventListener('input', async () => {
    const text = input.value.trim();
    const n = ++asked;
    if (text.length < 2) return close();
    let found;
    try {
      found = (await api('GET', `${base(raceId, eventId, version)}/search?q=${enc(text)}`, { signal })).data;
    } catch {
      return;
    }
    if (n !== asked) return; // a later keystroke's answer wins
    items = found.suggestions.map((s, i) => {
      const li = h('li', { id: `suggestion-${i}`, role: 'option', 'aria-selected': 'false', testid: 'suggestion',
        'data-bib': s.bib }, `${s.name} · bib ${s.bib}${s.place ? ` · ${s.place}.` : ` · ${s.status}`}`);
      li.addEventListener('mousedown', (ev) => ev.preventDefault());
      li.addEventListener('click', () => open(s.bib));
      return li;
    });
    list.replaceChildren(...(items.length ? items : [h('li', { cls: 'muted', testid: 'no-match' }, 'No runner found')]));
    list.hidden = false;
    input.setAttribute('aria-expanded', 'true');
    mark(-1);
    say(`${items.length} suggestion${items.length === 1 ? '' : 's'}`);
  });
  input.addEventListener('keydown', (ev) => {
    if (list.hidden || !items.length) return;
    if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
      ev.preventDefault();
      const n = items.length;
      mark(ev.key === 'ArrowDown' ? (active + 1) % n : active <= 0 ? n - 1 : active - 1);
      items[active].scrollIntoView({ block: 'nearest' });
    } else if (ev.key === 'Enter' && active >= 0) {
      ev.preventDefault();
      open(items[active].dataset.bib);
    } else if (ev.key === 'Escape') {
      close();
    }
  });
  input.addEventListener('blur', () => setTimeout(close, 150));
  return h('div', { cls: 'field combo' },
    h('label', { for: 'runner-search' }, 'Find a runner'),
    h('p', { cls: 'hint', id: 'runner-search-hint' }, 'Type a name or a bib number (at least 2 characters).'),
    input, list);
}

export async function runnerPage(raceId, eventId, bib) {
  const { h1, body, signal } = page('Result');
  body.append(h('p', { cls: 'loading', testid: 'loading' }, 'Loading result…'));
  let data;
  try {
    const cur = await current(raceId, eventId, signal);
    if (cur.version == null) return notPublished(body, raceId);
    data = (await api('GET', `${base(raceId, eventId, cur.version)}/bibs/${enc(bib)}`, { signal })).data;
  } catch (e) {
    if (signal.aborted) return;
    const missing = e.code === 'RUNNER_NOT_FOUND';
    body.replaceChildren(errorBox(missing ? `Bib ${bib} has no result in this event.` : e.message,
      !missing && (() => runnerPage(raceId, eventId, bib))), backLink(raceId));
    return;
  }
  const r = data.result;
  retitle(h1, r.name);
  const of = (n, total) => (n == null ? '–' : `${n} of ${total}`);
  const finished = r.status === 'FINISHED';
  body.replaceChildren(
    h('p', { cls: 'muted', testid: 'runner-event' }, `${data.eventName} · bib ${r.bib}`),
    h('dl', { testid: 'runner-result' },
      h('dt', {}, 'Place'), h('dd', { testid: 'runner-place' }, finished ? of(r.place, r.of.overall) : r.status),
      h('dt', {}, 'Gender place'), h('dd', { testid: 'runner-gender-place' }, of(r.genderPlace, r.of.gender)),
      h('dt', {}, 'Age group'), h('dd', {}, `${r.ageGroup || '–'} (${of(r.ageGroupPlace, r.of.ageGroup)})`),
      h('dt', {}, 'Chip time'), h('dd', { testid: 'runner-chip' }, r.chipTime || '–'),
      h('dt', {}, 'Gun time'), h('dd', {}, r.gunTime || '–')),
    r.splits.length ? h('table', { testid: 'splits' }, h('caption', {}, 'Splits'),
      h('tbody', {}, r.splits.map((s) => h('tr', {}, h('th', { scope: 'row' }, s.name), h('td', {}, s.time || '–')))))
      : '',
    h('p', {}, h('a', { href: `#/races/${enc(raceId)}/events/${enc(eventId)}/results`, testid: 'all-results' },
      'All results')),
    backLink(raceId));
}
