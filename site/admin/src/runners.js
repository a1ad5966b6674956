// A race's runners: search (a bib, a whole email, or words of a name) and filters, a runner's
// detail (GET …/registrations/{id}: the registration and its payments and refunds), cancel
// with a refund (the confirmation shows the amount), and the CSV export.
import { announce, downloadCsv, h, show } from './dom.js';
import { minorFrom, money, showInZone } from './zone.js';

const enc = encodeURIComponent;

export async function runnersPage(api, raceId, subnav) {
  const race = await api.get(`/races/${enc(raceId)}`);
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const q = h('input', { id: 'runner-q', type: 'search', name: 'q', value: params.get('q') || '' });
  const eventSel = h('select', { id: 'runner-event', name: 'eventId' }, h('option', { value: '' }, 'All events'),
    race.events.map((e) => h('option', { value: e.eventId, selected: e.eventId === params.get('eventId') }, e.name)));
  const statusSel = h('select', { id: 'runner-status', name: 'status' }, ['', 'CONFIRMED', 'CANCELLING', 'CANCELLED'].map((s) =>
    h('option', { value: s, selected: s === (params.get('status') || '') }, s ? s[0] + s.slice(1).toLowerCase() : 'Any status')));
  const rows = h('tbody', {});
  const more = h('button', { type: 'button', hidden: true, 'data-testid': 'more-runners' }, 'Show more');
  const count = h('p', { role: 'status', 'data-testid': 'runner-count' });
  const detail = h('section', { 'aria-labelledby': 'runner-heading', 'data-testid': 'runner-detail', hidden: true, class: 'panel detail' });
  const exportBox = h('p', { role: 'status' });
  let cursor = null;
  let shown = 0;
  let latest = 0; // the newest load: an older one's answer, arriving after it, is dropped

  async function load(reset) {
    const mine = ++latest;
    if (reset) {
      rows.replaceChildren();
      cursor = null;
      shown = 0;
    }
    const query = new URLSearchParams({ limit: '50' });
    if (q.value.trim()) query.set('q', q.value.trim());
    if (eventSel.value) query.set('eventId', eventSel.value);
    if (statusSel.value) query.set('status', statusSel.value);
    if (cursor) query.set('cursor', cursor);
    const page = await api.get(`/races/${enc(raceId)}/registrations?${query}`);
    // A search sent before the first page arrived: both would land in the table otherwise.
    if (mine !== latest) return;
    for (const r of page.registrations) rows.append(row(r));
    shown += page.registrations.length;
    cursor = page.nextCursor;
    more.hidden = !cursor;
    count.textContent = `${shown} runner${shown === 1 ? '' : 's'} shown${cursor ? ' (more to load)' : ''}.`;
  }

  // Paid stays what was paid; refunded and net beside it, so a part refund is not hidden. A
  // list row carries refundedCents, the detail its ledger (which also counts later payments).
  function amounts(r) {
    const paid = r.ledger ? r.ledger.chargedCents : r.amountCents;
    const refunded = r.ledger ? r.ledger.refundedCents : r.refundedCents ?? 0;
    return { paid, refunded, net: paid - refunded };
  }

  function row(r) {
    const open = h('button', { type: 'button', class: 'link', 'data-testid': 'runner-open', onClick: () => openDetail(r.registrationId) }, `${r.firstName} ${r.lastName}`);
    const m = amounts(r);
    return h('tr', { 'data-testid': 'runner-row', dataset: { registrationId: r.registrationId } },
      h('td', { class: 'num' }, String(r.bib)), h('th', { scope: 'row' }, open), h('td', {}, r.email), h('td', {}, r.eventName),
      h('td', { 'data-testid': 'runner-status' }, r.status),
      h('td', { class: 'num', 'data-testid': 'runner-paid' }, money(m.paid, r.currency)),
      h('td', { class: 'num', 'data-testid': 'runner-refunded' }, m.refunded ? money(m.refunded, r.currency) : '—'),
      h('td', { class: 'num', 'data-testid': 'runner-net' }, money(m.net, r.currency)));
  }

  // A refund's state in words: PENDING and PROCESSING are settled automatically (the sweeper
  // asks the provider); FAILED means the money did not go back and can be refunded again.
  const STATE_WORDS = {
    SUCCEEDED: 'done',
    PENDING: 'pending with the payment provider',
    PROCESSING: "with the card's bank",
    REFUSED: 'refused by the payment provider: nothing refunded',
    FAILED: 'failed at the payment provider: refundable again',
  };
  function actorWord(e) {
    if (e.actor === 'runner') return 'The runner';
    return e.origin === 'outside' || e.actor === 'payment-provider' ? 'The payment provider' : 'A director';
  }

  // The runner's detail, read fresh from the API each time it opens (after a refund, too).
  async function openDetail(registrationId) {
    let r;
    try {
      r = await api.get(`/races/${enc(raceId)}/registrations/${enc(registrationId)}`);
    } catch (err) {
      detail.replaceChildren(h('h2', { id: 'runner-heading', tabIndex: -1 }, 'Runner'), h('p', { class: 'alert', role: 'alert' }, err.message));
      detail.hidden = false;
      return detail.querySelector('h2').focus();
    }
    rows.querySelector(`[data-registration-id="${CSS.escape(r.registrationId)}"]`)?.replaceWith(row(r));
    // The runner's answers and waiver acceptance: the search's row for this bib (the same
    // documented API), as the version of the questions they answered put them.
    const answered = await api.get(`/races/${enc(raceId)}/registrations?${new URLSearchParams({ q: String(r.bib), eventId: r.eventId })}`)
      .then((page) => page.registrations.find((x) => x.registrationId === r.registrationId) || null, () => null);
    const when = (iso) => (iso ? showInZone(iso, race.timeZone) : '—');
    const statement = r.ledger;
    const m = amounts(r);
    const facts = [
      ['Bib', r.bib], ['Event', r.eventName], ['Email', r.email || '(deleted after the retention period)'],
      ['Date of birth', r.dateOfBirth || '—'], ['Paid', money(m.paid, r.currency)],
      ['Refunded', money(m.refunded, r.currency)], ['Net', `${money(m.net, r.currency)} (paid less refunds)`], ['Confirmed', when(r.confirmedAt)],
      ['Status', r.status], ...(r.cancelledAt ? [['Cancelled', when(r.cancelledAt)]] : []),
      ...(r.teamName ? [['Team', `${r.teamName} (paid as the team's share)`]] : []),
      ...(r.refundId ? [['Refund', `${money(cancelRefund(r, statement), r.currency)} · ${r.refundId}`]] : []),
      ...(r.disputeId ? [['Dispute', r.disputeId]] : []),
    ];
    const ledger = h('table', { 'data-testid': 'ledger' },
      h('caption', {}, 'Payments and refunds'),
      h('thead', {}, h('tr', {}, ...['When', 'What', 'Amount', 'Reason', 'By', 'State'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, statement.entries.map((e) => h('tr', { 'data-testid': 'ledger-entry' },
        h('td', {}, when(e.at)), h('td', {}, e.kind === 'payment' ? 'Payment' : 'Refund'),
        h('td', { class: 'num' }, money(e.amountCents, e.currency)), h('td', {}, e.reason || '—'),
        h('td', {}, actorWord(e)), h('td', {}, STATE_WORDS[e.status] || e.status.toLowerCase())))));
    const confirmed = r.status === 'CONFIRMED';
    detail.replaceChildren(
      ...[
        h('h2', { id: 'runner-heading', tabIndex: -1 }, `${r.firstName} ${r.lastName}`),
        h('dl', { class: 'facts' }, facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-testid': `fact-${k.toLowerCase().replace(/ /g, '-')}` }, String(v))])),
        h('p', { 'data-testid': 'ledger-summary' },
          `Charged ${money(statement.chargedCents, statement.currency)} · refunded ${money(statement.refundedCents, statement.currency)}`
          + (statement.pendingCents ? ` (${money(statement.pendingCents, statement.currency)} of it pending with the payment provider)` : '')
          + ` · ${money(statement.leftCents, statement.currency)} left to refund`),
        h('div', { class: 'scroll' }, ledger),
        ...answersOf(answered, when),
        confirmed ? h('div', { class: 'row' },
          h('button', { type: 'button', 'data-testid': 'cancel-registration', onClick: () => moneyForm({ r, kind: 'cancel' }) }, 'Cancel the registration…'),
          statement.leftCents > 0 ? h('button', { type: 'button', 'data-testid': 'refund-part', onClick: () => moneyForm({ r, kind: 'refund' }) }, 'Refund part of the payment…') : null,
        ) : null, // none once cancelled (replaceChildren would print a null)
      ].filter(Boolean),
    );
    detail.hidden = false;
    detail.querySelector('h2').focus();
  }

  // The answers (in the order asked) and the waiver's acceptance, if the event asked any.
  function answersOf(a, when) {
    if (!a || (!a.answers.length && !a.waiver)) return [];
    const facts = a.answers.map((x) => [x.label, x.text, x.questionId]);
    if (a.waiver) {
      facts.push(['Waiver', `Accepted version ${a.waiver.version} on ${when(a.waiver.acceptedAt)}`, 'waiver']);
      if (a.waiver.guardianName) facts.push(['Parent or guardian', `${a.waiver.guardianName}, accepted too`, 'guardian']);
    }
    return [
      h('h3', {}, a.questionsVersion ? `Answers (questions version ${a.questionsVersion})` : 'Waiver'),
      h('dl', { class: 'facts answers', 'data-testid': 'runner-answers' },
        facts.flatMap(([k, v, id]) => [h('dt', {}, k), h('dd', { 'data-testid': `answer-${id}` }, v)])),
    ];
  }

  // What the cancellation refunded: its ledger entry (key refund-<registrationId>-c<8 hex>, or
  // refund-<registrationId> for one from before the refund choice), else the rest of the
  // payment after the director's earlier refunds (a part refund's key has 12 hex).
  function cancelRefund(r, statement) {
    const key = new RegExp(`^refund-${r.registrationId.replace(/[^\w-]/g, '')}(-c[0-9a-f]{8})?$`);
    const own = statement.entries.find((e) => e.kind === 'refund' && key.test(e.key));
    if (own) return own.amountCents;
    const before = statement.entries.filter((e) => e.kind === 'refund' && e.status !== 'REFUSED').reduce((n, e) => n + e.amountCents, 0);
    return r.amountCents - before;
  }

  // -- money back: cancel with a refund (full, none or an amount), or refund part ----------
  // Two steps each: what and why, then a confirmation that states the amount before anything
  // is sent. The cancel body is issue 25's contract: {refund: FULL|NONE|AMOUNT, amountCents
  // (AMOUNT only), reason}. FULL is what the call did before that body existed, so the console
  // sends it by leaving `refund` out: the same request works on either side of that change.
  function moneyForm({ r, kind }) {
    const statement = r.ledger;
    const c = statement.currency;
    const left = statement.leftCents;
    const cancel = kind === 'cancel';
    const who = `${r.firstName} ${r.lastName}`;
    const heading = h('h2', { id: 'runner-heading', tabIndex: -1 }, cancel ? `Cancel ${who}'s registration?` : `Refund part of ${who}'s payment`);
    const error = h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': 'cancel-alert' });
    const choices = cancel
      ? [['FULL', `Refund what is left of the payment (${money(left, c)})`], ['AMOUNT', 'Refund an amount'], ['NONE', 'No refund']]
      : [];
    const radios = choices.map(([value, label], i) => {
      const input = h('input', { type: 'radio', name: 'refund', id: `refund-${value}`, value, checked: i === 0 });
      return h('div', { class: 'field check' }, input, h('label', { htmlFor: input.id }, label));
    });
    const amountId = 'refund-amountCents';
    const amount = h('input', { id: amountId, name: 'amountCents', inputMode: 'decimal', 'aria-describedby': `${amountId}-hint ${amountId}-error` });
    const amountError = h('p', { id: `${amountId}-error`, class: 'error', hidden: true });
    const amountWrap = h('div', { class: 'field', dataset: { field: 'amountCents' } },
      h('label', { htmlFor: amountId }, `Amount to refund (${c})`),
      h('p', { id: `${amountId}-hint`, class: 'hint' }, `Up to ${money(left, c)}, what is left of the ${money(statement.chargedCents, c)} paid.`),
      amount, amountError);
    const reason = h('input', { id: 'cancel-reason', name: 'reason', maxLength: 500 });
    const chosen = () => (cancel ? radios.map((w) => w.querySelector('input')).find((x) => x.checked).value : 'AMOUNT');
    const sync = () => {
      amountWrap.hidden = chosen() !== 'AMOUNT';
    };
    for (const w of radios) w.querySelector('input').addEventListener('change', sync);
    sync();
    const review = h('button', { type: 'submit', class: 'primary', 'data-testid': 'review-refund' }, 'Review');
    const back = h('button', { type: 'button', onClick: () => openDetail(r.registrationId) }, cancel ? 'Keep the registration' : 'Back');
    const form = h('form', { noValidate: true, 'data-testid': cancel ? 'cancel-form' : 'refund-form' },
      error,
      cancel ? h('fieldset', { class: 'sub' }, h('legend', {}, 'Refund'), ...radios) : null,
      amountWrap,
      h('div', { class: 'field' }, h('label', { htmlFor: 'cancel-reason' }, 'Reason (kept in the audit trail)'), reason),
      h('div', { class: 'row' }, review, back));

    function fieldError(message) {
      amountError.textContent = message || '';
      amountError.hidden = !message;
      amount.setAttribute('aria-invalid', message ? 'true' : 'false');
    }

    form.addEventListener('submit', (e) => {
      e.preventDefault();
      error.hidden = true;
      fieldError('');
      const choice = chosen();
      let cents = choice === 'FULL' ? left : choice === 'NONE' ? 0 : minorFrom(amount.value, c);
      if (choice === 'AMOUNT') {
        if (Number.isNaN(cents) || cents <= 0) {
          fieldError(`Give an amount in ${c}, e.g. ${money(Math.min(left, 10 ** 3), c).replace(/[^0-9.,]/g, '')}.`);
          return amount.focus();
        }
        if (cents > left) {
          fieldError(`At most ${money(left, c)} is left to refund.`);
          return amount.focus();
        }
      }
      confirmStep(choice, cents, reason.value.trim());
    });

    // The confirmation: the amount, stated, and one button that does exactly that.
    function confirmStep(choice, cents, why) {
      const sentence = cancel
        ? (choice === 'NONE'
          ? `${who}'s registration is cancelled with no refund, and their place goes back on sale.`
          : `${who}'s registration is cancelled and ${money(cents, c)} is refunded to the card they paid with; their place goes back on sale.`)
        : `${who} is refunded ${money(cents, c)} to the card they paid with and stays registered.`;
      const label = cancel ? (choice === 'NONE' ? 'Cancel without a refund' : `Cancel and refund ${money(cents, c)}`) : `Refund ${money(cents, c)}`;
      const go = h('button', { type: 'button', class: 'primary danger', 'data-testid': 'confirm-cancel' }, label);
      const change = h('button', { type: 'button', 'data-testid': 'change-refund', onClick: () => {
        detail.replaceChildren(heading, form);
        review.focus();
      } }, 'Change');
      const alert = h('div', { class: 'alert', role: 'alert', hidden: true, tabIndex: -1, 'data-testid': 'confirm-alert' });
      // One key for this refund, whatever happens to the click: pressing again after an error
      // (a timeout, the provider's budget spent) resumes the same refund, never a second one.
      const refundKey = `console-${crypto.randomUUID()}`;
      go.addEventListener('click', async () => {
        go.disabled = change.disabled = true;
        alert.hidden = true;
        try {
          let done;
          if (cancel) {
            const body = { reason: why, ...(choice === 'FULL' ? {} : { refund: choice }), ...(choice === 'AMOUNT' ? { amountCents: cents } : {}) };
            done = await api.post(`/races/${enc(raceId)}/registrations/${enc(r.registrationId)}/cancel`, body);
          } else {
            done = await api.post(`/races/${enc(raceId)}/registrations/${enc(r.registrationId)}/refunds`,
              { amountCents: cents, reason: why }, { headers: { 'Idempotency-Key': refundKey } });
          }
          await openDetail(r.registrationId);
          const refunded = cancel ? (done.refundedCents ?? (choice === 'NONE' ? 0 : cents)) : done.refund.amountCents;
          const waiting = !cancel && ['PENDING', 'PROCESSING'].includes(done.refund.status);
          announce(cancel ? `Cancelled; ${money(refunded, c)} refunded.`
            : waiting ? `${money(refunded, c)} refund sent; pending with the payment provider, settled automatically.`
              : `${money(refunded, c)} refunded.`);
        } catch (err) {
          alert.textContent = [err.message, ...Object.values(err.fields || {})].join(' ');
          alert.hidden = false;
          go.disabled = change.disabled = false;
          alert.focus();
        }
      });
      detail.replaceChildren(...[
        h('h2', { id: 'runner-heading', tabIndex: -1 }, cancel ? `Confirm: cancel ${who}'s registration` : `Confirm the refund to ${who}`),
        h('p', { 'data-testid': 'refund-amount' }, sentence),
        why ? h('p', {}, `Reason: ${why}`) : null,
        alert,
        h('div', { class: 'row' }, go, change),
      ].filter(Boolean)); // replaceChildren would print a null
      detail.querySelector('h2').focus();
    }

    detail.replaceChildren(heading, form);
    heading.focus();
  }

  async function download() {
    exportBox.textContent = 'Preparing the export…';
    await downloadCsv(api, `/races/${enc(raceId)}/registrations/export?includeCancelled=true`, `${raceId}-registrations.csv`);
    exportBox.textContent = 'The export is downloaded.';
  }

  const search = h('form', { role: 'search', class: 'filters', 'data-testid': 'runner-search' },
    h('div', { class: 'field' }, h('label', { htmlFor: 'runner-q' }, 'Find a runner'), h('p', { class: 'hint', id: 'runner-q-hint' }, 'A bib, a whole email, or words of a name.'), q),
    h('div', { class: 'field' }, h('label', { htmlFor: 'runner-event' }, 'Event'), eventSel),
    h('div', { class: 'field' }, h('label', { htmlFor: 'runner-status' }, 'Status'), statusSel),
    h('button', { type: 'submit', 'data-testid': 'runner-search-submit' }, 'Search runners'));
  q.setAttribute('aria-describedby', 'runner-q-hint');
  search.addEventListener('submit', (e) => {
    e.preventDefault();
    load(true).catch((err) => (count.textContent = err.message));
  });
  more.addEventListener('click', () => load(false));

  show(
    h('p', {}, h('a', { href: '#/races' }, '← Your races')),
    h('h1', {}, `Runners · ${race.name}`),
    subnav(raceId, 'runners'),
    h('div', { class: 'row' }, h('button', { type: 'button', 'data-testid': 'export', onClick: () => download().catch((err) => (exportBox.textContent = err.message)) }, 'Download CSV export'), exportBox),
    search,
    count,
    h('div', { class: 'split' },
      h('div', { class: 'scroll' }, h('table', { 'data-testid': 'runners' },
        h('thead', {}, h('tr', {}, ...['Bib', 'Name', 'Email', 'Event', 'Status', 'Paid', 'Refunded', 'Net'].map((t) => h('th', { scope: 'col' }, t)))), rows), more),
      detail),
  );
  await load(true);
}

// The trail in words: who (a director by name, a runner by registration, the payment provider,
// a job) and what, rather than action codes; the code stays in the row's title and data.
function whoDid(actor) {
  if (!actor) return '—';
  if (actor.kind === 'runner') return `Runner of registration ${actor.id}`;
  if (actor.kind === 'provider') return 'The payment provider';
  if (actor.kind === 'system') return actor.name || 'Racecap';
  return actor.name || actor.id;
}

function whatHappened(e) {
  const d = e.details || {};
  const amount = (cents) => money(cents ?? 0, d.currency || 'USD');
  const said = {
    'registration.cancel': () => `Cancelled registration ${e.target}${d.bib ? ` (bib ${d.bib})` : ''}; `
      + (d.refundCents ? `refunded ${amount(d.refundCents)}` : 'no refund'),
    'registration.refund': () => `Refunded ${amount(d.amountCents)} of registration ${e.target}`,
    'registration.email.changed': () => `Changed the email address of registration ${e.target}${d.bib ? ` (bib ${d.bib})` : ''}`,
    'registration.refund.failed': () => `The refund of ${amount(d.amountCents)} to registration ${e.target} failed at the payment provider; it can be refunded again`,
    'registration.refund.outside': () => `A refund of ${amount(d.amountCents)} to registration ${e.target} was made in the payment provider's dashboard`,
    'race.create': () => 'Created the race',
    'race.update': () => 'Changed the race',
    'event.update': () => 'Changed an event',
    'waitlist.close': () => "Closed an event's waitlist",
    'waitlist.entry.remove': () => `Removed entry ${e.target}${d.number ? ` (number ${d.number})` : ''} from an event's waitlist`,
  }[e.action];
  return said ? said() : e.action.replaceAll('.', ' ');
}

export async function auditPage(api, raceId, subnav) {
  const race = await api.get(`/races/${enc(raceId)}`);
  const list = h('tbody', {});
  const more = h('button', { type: 'button', hidden: true }, 'Show older');
  let cursor = null;
  async function load() {
    const page = await api.get(`/races/${enc(raceId)}/audit${cursor ? `?cursor=${enc(cursor)}` : ''}`);
    for (const e of page.entries) {
      list.append(h('tr', { 'data-testid': 'audit-entry', 'data-action': e.action },
        h('td', {}, showInZone(e.at, race.timeZone)), h('td', { 'data-testid': 'audit-actor' }, whoDid(e.actor)),
        h('td', { 'data-testid': 'audit-action', title: e.action }, whatHappened(e)), h('td', {}, e.target),
        h('td', { class: 'details' }, JSON.stringify(e.details))));
    }
    cursor = page.nextCursor;
    more.hidden = !cursor;
  }
  more.addEventListener('click', load);
  show(
    h('p', {}, h('a', { href: '#/races' }, '← Your races')),
    h('h1', {}, `Audit trail · ${race.name}`),
    subnav(raceId, 'audit'),
    h('div', { class: 'scroll' }, h('table', { 'data-testid': 'audit' },
      h('thead', {}, h('tr', {}, ...['When', 'Who', 'What', 'On', 'Details'].map((t) => h('th', { scope: 'col' }, t)))), list)),
    more,
  );
  await load();
}
