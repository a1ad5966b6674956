/* A stand-in for Stripe.js (https://js.stripe.com/v3/), served by the local Stripe stand-in.
 *
 * The calls Racecap's site makes, with Stripe's shapes:
 *   const stripe = Stripe("pk_test_…");
 *   const elements = stripe.elements({ clientSecret });
 *   const card = elements.create("payment"); card.mount("#pay"); card.on("change", e => e.complete);
 *   const { error, paymentIntent } = await stripe.confirmPayment({ elements, redirect: "if_required",
 *                                                                  confirmParams: { return_url } });
 *   const { paymentIntent } = await stripe.retrievePaymentIntent(clientSecret);
 *
 * As with Stripe, the card form is an iframe served from this script's own origin: the card
 * number is typed into that frame and sent from it to the provider only; the page that embeds
 * it never sees it. A card that asks for 3-D Secure opens a challenge frame (approve / fail)
 * over the page, also from this origin. */
(function () {
  "use strict";
  var ORIGIN = new URL(document.currentScript.src).origin;
  var frames = 0;

  function Stripe(key) {
    if (!(this instanceof Stripe)) return new Stripe(key);
    if (typeof key !== "string" || key.indexOf("pk_") !== 0) {
      throw new Error("Stripe(): a publishable key (pk_…) is required");
    }
    this._key = key;
  }

  Stripe.prototype.elements = function (options) {
    if (!options || typeof options.clientSecret !== "string") {
      throw new Error("elements(): clientSecret is required");
    }
    return new Elements(this, options.clientSecret);
  };

  Stripe.prototype.confirmPayment = function (options) {
    var element = options && options.elements && options.elements._element;
    if (!element || !element._frame) {
      return Promise.reject(new Error("confirmPayment(): mount a payment Element first"));
    }
    var params = options.confirmParams || {};
    var self = this;
    return element._call({ type: "confirm", returnUrl: params.return_url || "" }).then(function (reply) {
      if (reply.intent && reply.intent.status === "requires_action") {
        return self._challenge(reply.intent, element._elements._clientSecret).then(function () {
          return element._call({ type: "finish" });
        });
      }
      return reply;
    }).then(function (reply) {
      var result = reply.error ? { error: reply.error } : { paymentIntent: reply.intent };
      if (!reply.error && options.redirect !== "if_required" && params.return_url) {
        window.location.assign(params.return_url + (params.return_url.indexOf("?") < 0 ? "?" : "&") +
          "payment_intent=" + encodeURIComponent(reply.intent.id) + "&redirect_status=" + reply.intent.status);
      }
      return result;
    });
  };

  Stripe.prototype.retrievePaymentIntent = function (clientSecret) {
    var id = String(clientSecret).split("_secret_")[0];
    return fetch(ORIGIN + "/v1/payment_intents/" + encodeURIComponent(id) +
                 "?client_secret=" + encodeURIComponent(clientSecret),
                 { headers: { Authorization: "Bearer " + this._key } })
      .then(function (r) { return r.json(); })
      .then(function (body) { return body.error ? { error: body.error } : { paymentIntent: body }; });
  };

  // The bank's 3-D Secure page, over the merchant's page (Stripe shows a modal the same way).
  Stripe.prototype._challenge = function (intent, clientSecret) {
    var key = this._key;
    return new Promise(function (resolve) {
      var overlay = document.createElement("div");
      overlay.setAttribute("data-stripe-standin", "3ds");
      overlay.style.cssText = "position:fixed;inset:0;background:rgba(0,0,0,.45);display:flex;" +
        "align-items:center;justify-content:center;z-index:2147483647";
      var frame = document.createElement("iframe");
      frame.title = "3D Secure authentication";
      frame.style.cssText = "border:0;width:360px;height:260px;background:#fff;border-radius:8px";
      frame.src = ORIGIN + "/3ds/" + encodeURIComponent(intent.id) + "#" + new URLSearchParams({
        key: key, clientSecret: clientSecret, origin: window.location.origin }).toString();
      function onMessage(event) {
        if (event.origin !== ORIGIN || event.source !== frame.contentWindow) return;
        if (!event.data || event.data.source !== "stripe-standin" || event.data.type !== "3ds-done") return;
        window.removeEventListener("message", onMessage);
        overlay.remove();
        resolve();
      }
      window.addEventListener("message", onMessage);
      overlay.appendChild(frame);
      document.body.appendChild(overlay);
    });
  };

  function Elements(stripe, clientSecret) {
    this._stripe = stripe;
    this._clientSecret = clientSecret;
    this._element = null;
  }

  Elements.prototype.create = function (type) {
    if (type !== "payment" && type !== "card") {
      throw new Error("elements.create(): the stand-in offers 'payment' (cards only)");
    }
    this._element = new PaymentElement(this);
    return this._element;
  };

  Elements.prototype.getElement = function () { return this._element; };

  Elements.prototype.submit = function () {
    return this._element ? this._element._call({ type: "validate" }) : Promise.resolve({});
  };

  function PaymentElement(elements) {
    this._elements = elements;
    this._handlers = {};
    this._frame = null;
    this._pending = {};
    this._seq = 0;
    this._onMessage = this._onMessage.bind(this);
  }

  PaymentElement.prototype.mount = function (target) {
    var host = typeof target === "string" ? document.querySelector(target) : target;
    if (!host) throw new Error("mount(): no element matches " + target);
    var frame = document.createElement("iframe");
    frame.name = "__privateStripeFrame" + (++frames);
    frame.title = "Secure payment input frame";
    frame.setAttribute("allow", "payment");
    frame.style.cssText = "border:0;width:100%;height:170px;display:block";
    frame.src = ORIGIN + "/elements/payment#" + new URLSearchParams({
      key: this._elements._stripe._key, clientSecret: this._elements._clientSecret,
      origin: window.location.origin }).toString();
    window.addEventListener("message", this._onMessage);
    host.appendChild(frame);
    this._frame = frame;
  };

  PaymentElement.prototype.unmount = PaymentElement.prototype.destroy = function () {
    window.removeEventListener("message", this._onMessage);
    if (this._frame) this._frame.remove();
    this._frame = null;
  };

  PaymentElement.prototype.on = function (name, handler) {
    (this._handlers[name] = this._handlers[name] || []).push(handler);
    return this;
  };

  PaymentElement.prototype._emit = function (name, payload) {
    (this._handlers[name] || []).forEach(function (h) { h(payload); });
  };

  PaymentElement.prototype._call = function (message) {
    var self = this;
    var id = ++this._seq;
    return new Promise(function (resolve) {
      self._pending[id] = resolve;
      self._frame.contentWindow.postMessage(Object.assign({ source: "stripe-standin", id: id }, message), ORIGIN);
    });
  };

  PaymentElement.prototype._onMessage = function (event) {
    if (!this._frame || event.origin !== ORIGIN || event.source !== this._frame.contentWindow) return;
    var data = event.data || {};
    if (data.source !== "stripe-standin") return;
    if (data.type === "reply" && this._pending[data.id]) {
      var resolve = this._pending[data.id];
      delete this._pending[data.id];
      resolve(data);
    } else if (data.type === "ready") {
      this._emit("ready", { elementType: "payment" });
    } else if (data.type === "change") {
      this._emit("change", { elementType: "payment", complete: !!data.complete, empty: !!data.empty });
    }
  };

  window.Stripe = Stripe;
})();
