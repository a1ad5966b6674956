// #/ballot/guaranteed/{raceId}/{eventId} (ballot.js's route): a guaranteed entry (charity, qualifier,
// deferral). Its code holds one of the places the ballot keeps out of the draw, once it is drawn
// (POST …/holds/guaranteed); then the hold page, as for any place, the code already on it.
import { api } from './api.js';
import { device } from './identity.js';
import { backLink, enc, go, h, page, setText } from './ui.js';

export function guaranteedPage(raceId, eventId) {
  const { body, signal } = page('A guaranteed entry');
  const input = h('input', { id: 'gte-code', name: 'code', autocomplete: 'off', required: true,
    'aria-describedby': 'gte-code-err', testid: 'gte-code' });
  const err = h('p', { cls: 'field-error', id: 'gte-code-err', testid: 'gte-code-error' });
  const send = h('button', { type: 'submit', cls: 'primary', testid: 'gte-hold' }, 'Hold my place');
  const form = h('form', { novalidate: true },
    h('div', { cls: 'field' }, h('label', { for: 'gte-code' }, 'Your guaranteed-entry code'), input, err), send);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    setText(err, input.value.trim() ? '' : 'Enter the code you were given.');
    if (!input.value.trim()) return input.focus();
    send.disabled = true;
    try {
      await device(signal);
      const { data } = await api('POST', `/races/${enc(raceId)}/events/${enc(eventId)}/holds/guaranteed`,
        { body: { code: input.value.trim() }, signal });
      return go(`/holds/${enc(data.holdId)}`);
    } catch (x) {
      if (signal.aborted) return;
      setText(err, x.message);
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      send.disabled = false;
    }
  });
  body.replaceChildren(h('p', {}, 'The race keeps some places out of the ballot for guaranteed entries: charity '
    + 'places, qualifiers, deferrals. If you were given a code for one, it holds your place once the ballot is drawn.'),
  form, backLink(raceId));
}
