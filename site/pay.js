// The card form: Stripe's Payment Element (cards only), loaded from the payment provider's
// own origin. The card number is typed into the provider's frame and goes to the provider
// only: this page, Racecap's API and its logs never see it. The server tells the page which
// script and publishable key to use (the registration answer), so a local stack loads the
// stand-in and a stage loads https://js.stripe.com/v3/.

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
