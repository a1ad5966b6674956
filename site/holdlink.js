// #/holds/{holdId} opened where the place was not held (a phone, another browser): the hold's
// public facts from the API (never the runner's details), kept as the hold page's context, then
// the hold page as usual, at the card step if the details were sent. Loaded only for such links.
import { api, withBusyRetry } from './api.js';
import { backLink, enc, errorBox, go, h, page, store } from './ui.js';
import { holdGone } from './holdend.js';

export async function openLink(holdId, holdPage) {
  const { body, signal } = page('Register');
  body.replaceChildren(h('p', { cls: 'loading', testid: 'loading' }, 'Loading your hold…'));
  let hd;
  try {
    hd = (await withBusyRetry(() => api('GET', `/holds/${enc(holdId)}`, { signal }), { signal })).data;
  } catch (e) {
    if (!signal.aborted) {
      body.replaceChildren(errorBox(e.status === 404 ? 'We could not find this hold.' : e.message), backLink());
    }
    return;
  }
  if (hd.registrationId) return go(`/registrations/${enc(hd.registrationId)}`, true);
  if (!['HELD', 'PAYING'].includes(hd.status)) {
    return holdGone(body, hd.raceId, 'This hold has expired or was released. You can hold a new place.');
  }
  const { status, ...facts } = hd;
  store.set(`hold:${holdId}`, { ...facts, elsewhere: status === 'PAYING' });
  return holdPage(holdId);
}
