// A step that cannot be undone asks first (waitlist.js, ballot.js): kept out of ui.js, which every page loads.
import { h } from './ui.js';

// A step that cannot be undone asks first: `trigger` becomes "yes" (focused) and "no" (back to it).
// The yes/no buttons' test ids are `${id}-yes` and `${id}-no`; the group's `${id}-confirm`.
export function askFirst(trigger, { id, question, yes: yesText, no: noText, label }, act) {
  trigger.addEventListener('click', () => {
    const yes = h('button', { type: 'button', cls: 'primary', testid: `${id}-yes` }, yesText);
    const no = h('button', { type: 'button', testid: `${id}-no` }, noText);
    const ask = h('div', { role: 'group', 'aria-label': label, testid: `${id}-confirm` }, h('p', {}, question), yes, no);
    trigger.replaceWith(ask);
    yes.focus();
    no.addEventListener('click', () => (ask.replaceWith(trigger), trigger.focus()));
    yes.addEventListener('click', async () => {
      yes.disabled = true;
      no.disabled = true;
      try {
        await act();
      } catch (e) {
        ask.append(h('p', { role: 'alert' }, e.message));
        yes.disabled = false;
        no.disabled = false;
      }
    });
  });
}

export function focusState(testid) {
  const done = document.querySelector(`[data-testid="${testid}"]`);
  if (done) (done.setAttribute('tabindex', '-1'), done.focus());
}
