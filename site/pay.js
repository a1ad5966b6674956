// The card form: Stripe's Payment Element (cards only), loaded from the payment provider's
// own origin. The card number is typed into the provider's frame and goes to the provider
// only: this page, Racecap's API and its logs never see it. The server tells the page which
// script and publishable key to use (the registration answer), so a local stack loads the
// stand-in and a stage loads https://js.stripe.com/v3/.
import { api, sleep, withBusyRetry } from './api.js';
import { enc } from './ui.js';

// 3-D Secure or a bank still deciding: ask again, as Retry-After says, this many times.
const PENDING_TRIES = 30;

let loading = null;

function loadScript(src) {
  if (window.Stripe) return Promise.resolve();
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = src;
      s.onload = () => resolve();
      s.onerror = () => {
        loading = null;
        reject(new Error('The payment form could not be loaded. Check your connection and try again.'));
      };
      document.head.append(s);
    });
  }
  return loading;
}

// Mounts the card form for the hold's intent into `host`; returns { confirm }, where
// confirm() resolves to { status } (the intent's, e.g. 'succeeded') or { error } (a decline,
// a failed 3-D Secure check: the runner stays on the form and may try another card).
export async function mountCardForm(host, { paymentsScript, publishableKey, clientSecret }) {
  await loadScript(paymentsScript);
  const stripe = window.Stripe(publishableKey);
  const elements = stripe.elements({ clientSecret });
  const element = elements.create('payment', { paymentMethodOrder: ['card'] });
  host.replaceChildren();
  element.mount(host);
  return {
    async confirm() {
      const { error, paymentIntent } = await stripe.confirmPayment({
        elements,
        redirect: 'if_required',
        confirmParams: { return_url: location.href },
      });
      if (error) return { error: error.message || 'Your card was declined.' };
      return { status: paymentIntent.status };
    },
    destroy() {
      element.destroy();
    },
  };
}

// The card, then the server's word on it (the server asks the provider, it never takes the
// page's): confirm() on the mounted form, then POST /holds/{id}/payment/confirm, asked again
// while the payment is pending. Resolves to { declined } (the provider's message: the runner
// stays on the form and may try another card) or the confirm call's { data, retryAfter };
// throws the API's error (PAYMENT_DECLINED, HOLD_EXPIRED, ...). onPaid() runs once the card
// went through; onWait(seconds) while the API is busy (withBusyRetry's).
export async function payAndConfirm(card, holdId, { signal, onWait, onPaid } = {}) {
  const paid = await card.confirm();
  if (paid.error) return { declined: paid.error };
  if (onPaid) onPaid();
  for (let i = 0; ; i++) {
    try {
      return await withBusyRetry(() => api('POST', `/holds/${enc(holdId)}/payment/confirm`, { signal }),
        { signal, attempts: 10, onWait });
    } catch (e) {
      if (e.code !== 'PAYMENT_PENDING' || i >= PENDING_TRIES) throw e;
      await sleep((e.retryAfter || 2) * 1000, signal);
    }
  }
}

// A payment the server settles after the card (a transfer's fee, a switch's difference): confirm()
// on the mounted form, then the API's confirm call (`settle()`, answering { data, retryAfter })
// asked again while the provider is still deciding (status PROCESSING), as Retry-After says.
// `card` null: the card went through before (the last answer was already PROCESSING). Resolves
// to { declined } (the provider's message: the runner may try another card) or the last { data }.
export async function payAndSettle(card, settle, { signal, onPaid } = {}) {
  if (card) {
    const paid = await card.confirm();
    if (paid.error) return { declined: paid.error };
    if (onPaid) onPaid();
  }
  for (let i = 0; ; i++) {
    const { data, retryAfter } = await withBusyRetry(settle, { signal });
    if (data.status !== 'PROCESSING' || i >= PENDING_TRIES) return { data };
    await sleep((retryAfter || 2) * 1000, signal);
  }
}
