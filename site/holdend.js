// How a hold's page ends, for the runner's hold page (hold.js), a team's (team.js) and a hold
// link opened elsewhere (holdlink.js): registered, on to the waiting screen; or the hold gone.
// Kept out of ui.js, which every page loads (the race list at opening time too).
import { POLL_S, backLink, enc, go, h, pollScale, store } from './ui.js';

// Registered (queued): on to the waiting screen for registration `id`, whose first check is
// when the answer's Retry-After said (the writer's backlog: a second when it is idle), else the
// paper's 10 s. Keeps what that screen shows (`runner`'s details, the hold's race and event) and
// marks the hold registered; the hold's form is done with.
export function toWaitingScreen(holdId, ctx, id, retryAfter, runner = {}) {
  store.set(`reg:${id}`, { ...runner, raceId: ctx.raceId, raceName: ctx.raceName, eventName: ctx.eventName });
  store.set(`poll:${id}`, { n: 0, next: Date.now() + (retryAfter || POLL_S[0]) * 1000 * pollScale() });
  store.set(`hold:${holdId}`, { ...ctx, registrationId: id });
  store.del(`form:${holdId}`);
  return go(`/registrations/${enc(id)}`, true);
}

// A hold the server no longer has (expired, released, never found): the page's words in an
// alert, then the way back to the race, in `host`. focus: move focus to the alert (when the
// button that was pressed is now disabled).
export function holdGone(host, raceId, said, { focus = false } = {}) {
  const alert = h('div', { cls: 'alert', role: 'alert', tabindex: focus ? '-1' : null, testid: 'hold-expired' }, said);
  host.replaceChildren(alert, backLink(raceId));
  if (focus) alert.focus();
}
