// The hold page's discount code: applied to the held place (PUT /api/holds/{holdId}/code), its
// use taken at once; removable until the place is paid. On the card step the server changes
// the payment's amount too, so the card form mounted already charges the new price. The answer
// is the hold with its new price, which the page shows everywhere it shows the price.
import { api, withBusyRetry } from './api.js';
import { enc, h, money, say, setText, store } from './ui.js';

// Into ``slot``: the field, Apply, the applied code's status and Remove. ``onPrice`` shows the
// hold's new price wherever the page shows it; the hold's context keeps it across reloads.
export function codeBox(slot, holdId, ctx, onPrice, signal, focus) {
  const id = 'f-code';
  const input = h('input', {
    id, name: 'code', testid: 'field-code', autocomplete: 'off', spellcheck: 'false', maxlength: '40',
    autocapitalize: 'characters', 'aria-describedby': `${id}-err ${id}-status`,
  });
  const err = h('p', { id: `${id}-err`, cls: 'field-error', testid: 'error-code', hidden: true });
  const status = h('p', { id: `${id}-status`, role: 'status', testid: 'code-status', cls: 'status' });
  const apply = h('button', { type: 'button', testid: 'apply-code' }, 'Apply');
  const remove = h('button', { type: 'button', cls: 'link', testid: 'remove-code' }, 'Remove code');
  const setErr = (msg) => {
    err.textContent = msg || '';
    err.hidden = !msg;
    if (msg) input.setAttribute('aria-invalid', 'true');
    else input.removeAttribute('aria-invalid');
  };
  const show = (view) => {
    ctx.priceCents = view.priceCents;
    ctx.code = view.code || null;
    ctx.listPriceCents = view.listPriceCents;
    store.set(`hold:${holdId}`, ctx);
    onPrice();
    remove.hidden = !ctx.code;
    input.value = ctx.code || '';
    setText(status, ctx.code
      ? `Code ${ctx.code} applied: ${money(view.priceCents, ctx.currency)} instead of ${money(view.listPriceCents, ctx.currency)}.`
      : '');
  };
  const call = async (method, body) => {
    apply.disabled = remove.disabled = true;
    setErr('');
    try {
      const { data } = await withBusyRetry(() => api(method, `/holds/${enc(holdId)}/code`, { body, signal }), { signal });
      show(data);
      say(status.textContent || 'Code removed.');
    } catch (e) {
      if (!signal.aborted) {
        setErr(e.message);
        input.focus();
      }
    } finally {
      apply.disabled = remove.disabled = false;
    }
  };
  const submit = () => {
    const code = input.value.trim();
    if (!code) return setErr('Type the code, then Apply.');
    return call('PUT', { code });
  };
  apply.addEventListener('click', submit);
  // Enter in the code's field applies the code; it must not send the details form.
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      submit();
    }
  });
  remove.addEventListener('click', () => call('DELETE'));
  remove.hidden = !ctx.code;
  input.value = ctx.code || '';
  if (ctx.code && ctx.listPriceCents != null) show(ctx);
  slot.replaceChildren(h('div', { cls: 'field', testid: 'code-box' },
    h('label', { for: id }, 'Discount code (optional)'), err,
    h('div', { cls: 'row' }, input, apply), status, remove));
  if (focus) input.focus();
}
