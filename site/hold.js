// #/holds/{holdId}: the runner's details, then payment, while the hold's clock runs.
// Everything typed is kept in sessionStorage under the hold id, so a failed request,
// a reload or a declined card never loses it.
import { api, now, withBusyRetry } from './api.js';
import {
  BUSY, DETAILS, POLL_S, backLink, duration, enc, errorBox, every, go, h, money, page, pollScale, retitle, say,
  setText, statusLines, store, toMs,
} from './ui.js';
import { normaliseDate, registrationBody, validate } from './validate.js';

const LOCAL = ['localhost', '127.0.0.1', '[::1]'].includes(location.hostname);
const TOKENS = [['pm_card_visa', 'succeeds'], ['pm_card_chargeDeclined', 'is declined'], ['pm_card_authenticationRequired', 'asks for 3-D Secure']];

export function holdPage(holdId) {
  const ctx = store.get(`hold:${holdId}`) || { holdId };
  if (ctx.registrationId) return go(`/registrations/${enc(ctx.registrationId)}`, true);
  const { h1, body, signal } = page(ctx.eventName ? `Register: ${ctx.eventName}` : 'Register');
  // A new hold after an expired one starts from the details typed last time ("carry").
  const state = store.get(`form:${holdId}`) || { ...store.get('carry'), step: 1 };
  const save = () => store.set(`form:${holdId}`, state);
  const fields = {};

  const setErr = (name, msg) => {
    const f = fields[name];
    if (!f) return;
    f.err.textContent = msg || '';
    f.err.hidden = !msg;
    if (msg) f.input.setAttribute('aria-invalid', 'true');
    else f.input.removeAttribute('aria-invalid');
  };
  const check = (names) => {
    const errs = validate(state, names);
    for (const n of names) setErr(n, errs[n]);
    return errs;
  };
  const field = (name, label, attrs, hint) => {
    const id = `f-${name}`;
    const err = h('p', { id: `${id}-err`, cls: 'field-error', testid: `error-${name}`, hidden: true });
    const input = h('input', {
      id, name, testid: `field-${name}`, 'aria-describedby': `${hint ? `${id}-hint ` : ''}${id}-err`, ...attrs,
    });
    input.value = state[name] || '';
    input.addEventListener('input', () => {
      state[name] = input.value;
      delete state.pending; // edited, so the next submit is a new body
      save();
      if (!err.hidden) check([name]);
    });
    // Errors appear on Continue/submit, then update as the runner types. Not on blur: a
    // message appearing under a field as it loses focus moves the button being clicked.
    input.addEventListener('change', () => {
      if (name === 'dateOfBirth') state[name] = input.value = normaliseDate(input.value);
      save();
    });
    fields[name] = { input, err };
    return h('div', { cls: 'field' }, h('label', { for: id }, label),
      hint && h('p', { id: `${id}-hint`, cls: 'hint' }, hint), err, input);
  };

  const summary = h('div', { cls: 'alert', role: 'alert', tabindex: '-1', testid: 'error-summary', hidden: true });
  const showSummary = (errs) => {
    const names = Object.keys(errs).filter((n) => fields[n]);
    summary.hidden = !names.length;
    summary.replaceChildren(h('p', {}, h('strong', {}, 'Please fix:')), h('ul', {}, names.map((n) =>
      h('li', {}, h('a', { href: `#f-${n}`, onclick: (e) => (e.preventDefault(), fields[n].input.focus()) }, errs[n])))));
    if (names.length) summary.focus();
  };

  const details = h('fieldset', { testid: 'details-step' }, h('legend', {}, 'About the runner'),
    field('email', 'Email address', { type: 'email', autocomplete: 'email', spellcheck: 'false', required: true },
      'We send the confirmation here.'),
    field('firstName', 'First name', { autocomplete: 'given-name', maxlength: '100', required: true }),
    field('lastName', 'Last name', { autocomplete: 'family-name', maxlength: '100', required: true }),
    field('dateOfBirth', 'Date of birth', {
      autocomplete: 'bday', inputmode: 'numeric', placeholder: 'YYYY-MM-DD', required: true,
    }, 'Year-month-day, for example 1990-04-23. Runners must be at least 5 years old.'),
    h('button', { type: 'submit', cls: 'primary', testid: 'continue-button' }, 'Continue to payment'));

  const useToken = (t) => {
    fields.paymentMethod.input.value = state.paymentMethod = t;
    delete state.pending;
    save();
    setErr('paymentMethod', '');
  };
  const who = h('p', { testid: 'runner-summary' });
  const payment = h('fieldset', { testid: 'payment-step' }, h('legend', {}, 'Payment'), who,
    LOCAL && h('div', { cls: 'alert info', testid: 'test-cards' },
      h('p', {}, 'Local test stack, no real payments. Use a test payment method:'),
      h('ul', {}, TOKENS.map(([t, d]) => h('li', {}, h('button', {
        type: 'button', cls: 'link', testid: `use-${t}`, onclick: () => useToken(t),
      }, h('code', {}, t)), ` ${d}`)))),
    field('paymentMethod', 'Payment method', { autocomplete: 'off', spellcheck: 'false', required: true },
      'A payment method id from the payment provider (pm_...).'),
    h('div', { cls: 'row' },
      h('button', { type: 'submit', cls: 'primary', testid: 'submit-registration' }, 'Pay and register'),
      h('button', { type: 'button', testid: 'edit-details', onclick: () => step(1, 'email') }, 'Edit details')));
  const status = statusLines('form-status');
  const problem = h('div', { testid: 'form-error' });
  const form = h('form', { novalidate: true, testid: 'registration-form' },
    summary, details, payment, status.el, problem);

  function step(n, focusName) {
    state.step = n;
    save();
    details.hidden = n !== 1;
    payment.hidden = n !== 2;
    setText(who, `Registering ${state.firstName || ''} ${state.lastName || ''} (${state.email || ''}).`);
    if (focusName) fields[focusName].input.focus();
  }

  // The hold's clock on server time; announced at 2 min, 1 min and expiry.
  const exp = toMs(ctx.expiresAt);
  const timer = h('p', { cls: 'timer', testid: 'hold-countdown' });
  const bar = h('progress', { max: '1', value: '1', 'aria-hidden': 'true', hidden: !(exp && ctx.heldAt) });
  let warned = Infinity;
  let ended = false; // the server said the hold is gone, whatever the clock says
  const tick = () => {
    if (ended) {
      setText(timer, 'Your hold has expired.');
      timer.classList.add('warn');
      bar.value = 0;
      return;
    }
    if (Number.isNaN(exp)) return setText(timer, 'Your place is held for a limited time.');
    const left = exp - now();
    setText(timer, left > 0 ? `Your place is held for ${duration(left)}.` : 'Your hold has expired.');
    timer.classList.toggle('warn', left < 120000);
    if (ctx.heldAt) bar.value = Math.max(0, left / (exp - ctx.heldAt));
    for (const mark of [120000, 60000, 0]) {
      if (left > mark || warned <= mark) continue;
      warned = mark;
      say(mark ? `${mark / 60000} minute${mark > 60000 ? 's' : ''} left to finish registering.`
        : 'Your hold has expired. You may need to hold a new place.');
    }
  };
  every(1000, tick, signal);

  const release = h('button', { type: 'button', cls: 'link', testid: 'release-hold' }, 'Release my place');
  const releaseStatus = statusLines('release-status');
  release.addEventListener('click', async () => {
    release.disabled = true;
    releaseStatus.set('Releasing your place…');
    try {
      await withBusyRetry(() => api('DELETE', `/holds/${enc(holdId)}`, { signal }), { signal });
    } catch (e) {
      if (signal.aborted) return;
      if (e.status !== 404) { // 404: already gone, which is what the runner wanted
        releaseStatus.set(`Could not release your place. ${e.message}`, 'err');
        release.disabled = false;
        return;
      }
    }
    store.del(`hold:${holdId}`);
    store.del(`form:${holdId}`);
    retitle(h1, 'Place released');
    body.replaceChildren(h('p', { testid: 'released' }, 'Your place has been released for another runner.'),
      backLink(ctx.raceId));
    say('Your place has been released.');
  });

  const lock = (on) => {
    for (const b of form.querySelectorAll('button')) b.disabled = on;
    release.disabled = on;
    form.setAttribute('aria-busy', on);
  };

  async function submit(payload) {
    state.pending = payload; // a retry resends exactly this body
    save();
    lock(true);
    problem.replaceChildren();
    status.set('Sending your registration…');
    try {
      const { data } = await withBusyRetry(
        () => api('POST', `/holds/${enc(holdId)}/registration`, { body: payload, signal }),
        {
          signal,
          attempts: 10,
          onWait: (s) => {
            status.set(BUSY, 'warn');
            status.wait(s, (left) => `Trying again in ${left} s. Your details are kept.`);
          },
        },
      );
      const id = data.registrationId;
      const runner = { ...payload };
      delete runner.paymentMethod;
      store.set(`reg:${id}`, { ...runner, raceId: ctx.raceId, raceName: ctx.raceName, eventName: ctx.eventName });
      store.set(`poll:${id}`, { n: 0, next: Date.now() + POLL_S[0] * 1000 * pollScale() });
      store.set(`hold:${holdId}`, { ...ctx, registrationId: id });
      store.del(`form:${holdId}`);
      return go(`/registrations/${enc(id)}`, true);
    } catch (e) {
      if (signal.aborted) return;
      lock(false);
      status.set('');
      fail(e);
    }
  }

  function fail(e) {
    const errs = (e.code === 'VALIDATION_ERROR' && e.body && e.body.fields) || {};
    if (Object.keys(errs).length) {
      for (const [n, m] of Object.entries(errs)) setErr(n, String(m));
      delete state.pending;
      step(Object.keys(errs).some((n) => DETAILS.includes(n)) ? 1 : 2);
      showSummary(errs);
      if (!Object.keys(errs).some((n) => fields[n])) problem.replaceChildren(errorBox(e.message));
    } else if (e.code === 'PAYMENT_DECLINED' || e.code === 'EMAIL_ALREADY_REGISTERED') {
      const name = e.code === 'PAYMENT_DECLINED' ? 'paymentMethod' : 'email';
      delete state.pending;
      step(name === 'email' ? 1 : 2);
      const again = name === 'email' || /another card/i.test(e.message) ? '' : ' Try another card.';
      setErr(name, `${e.message}${again}`);
      fields[name].input.select();
      fields[name].input.focus();
      say(fields[name].err.textContent);
    } else if (e.code === 'HOLD_EXPIRED' || e.status === 404) {
      store.set('carry', Object.fromEntries(DETAILS.map((n) => [n, state[n]])));
      store.del(`hold:${holdId}`);
      lock(true);
      ended = true;
      tick();
      const alert = h('div', { cls: 'alert', role: 'alert', tabindex: '-1', testid: 'hold-expired' },
        h('p', {}, e.status === 404 ? 'We could not find this hold. It may have expired or been released.'
          : 'Your hold expired before we received your registration.'),
        h('p', {}, 'Your details are saved for your next attempt.'));
      problem.replaceChildren(alert, backLink(ctx.raceId));
      alert.focus(); // the button that was pressed is now disabled
    } else {
      // Network or server trouble. The server keys idempotency on the hold, so
      // resending the identical body can never register or charge twice.
      problem.replaceChildren(errorBox(`${e.message} Your details are saved.`, () => submit(state.pending)));
    }
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (form.getAttribute('aria-busy') === 'true') return;
    const errs = check(state.step === 1 ? DETAILS : [...DETAILS, 'paymentMethod']);
    const bad = Object.keys(errs);
    if (bad.length) {
      step(bad.some((n) => DETAILS.includes(n)) ? 1 : 2);
      return showSummary(errs);
    }
    summary.hidden = true;
    if (state.step === 1) return step(2, 'paymentMethod');
    submit(state.pending || registrationBody(state));
  });

  body.append(
    h('p', { testid: 'hold-summary' }, [ctx.eventName, ctx.raceName].filter(Boolean).join(' · '),
      ctx.priceCents != null ? ` · ${money(ctx.priceCents, ctx.currency)}` : ''),
    h('div', { cls: 'timer-box' }, timer, bar), form, h('p', {}, release), ...releaseStatus.el,
  );
  step(state.step === 2 && !Object.keys(validate(state, DETAILS)).length ? 2 : 1);
  if (state.pending) {
    problem.replaceChildren(errorBox('Your last attempt did not finish. Your details are saved.',
      () => submit(state.pending)));
  }
  import('./wait.js').catch(() => {}); // warm the next page
}
