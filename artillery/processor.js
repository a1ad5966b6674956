'use strict';
// Racecap's burst runners, for Artillery 2 (see the scenarios in this folder).
//
// Each virtual user is one runner with a unique identity. The flow is the one the site
// follows: race page -> hold a place -> fill in the form (think) -> send the details (the
// answer carries the hold's PaymentIntent client secret) -> pay in the card form, i.e.
// confirm the intent at the payment provider with the publishable key, as Stripe.js does
// (3-D Secure approved when the card asks) -> the hold's payment/confirm route -> the
// waiting screen, which polls the registration with the server's Retry-After (the writer's
// real backlog, capped by the paper's 10, 20, 40, 60 s) until it is CONFIRMED. The provider's webhook reaches the API as well;
// whichever comes first queues the registration.
//
// Cards, per 20 runners (in arrival order, per Artillery worker): 2 are declined (one
// generic decline, one insufficient funds) and then pay with a good card, as a runner
// stays on the form and tries another card; 1 asks for 3-D Secure and approves it; the
// other 17 pay with 4242. That is the 10 % declines and 5 % 3-D Secure.
//
// Configuration comes from the environment (tools/burst sets it; defaults are the
// paper's realistic values):
//   RACECAP_RACE_ID            the race (required)
//   RACECAP_EVENT_ID           one event for everyone (default: pick among open events,
//                              weighted by places left, as runners spread over distances)
//   RACECAP_THINK_MIN_S/MAX_S  time spent on the form, uniform in [min, max] (15..60)
//   RACECAP_BACKOFF_SCALE      multiplies the waiting screen's own first wait, the paper's
//                              10 s (1 = real; the local burst uses less and says so in its
//                              report). The server's Retry-After is never scaled: it is the
//                              writer's real backlog in real seconds, and asking sooner than
//                              it says only adds status reads
//   RACECAP_CONFIRM_TIMEOUT_S  a runner gives up waiting after this long (600)
//   RACECAP_PAY_RETRY_S        a runner clicks "Pay" again this long after the provider
//                              itself answered 429 (1)
//   RACECAP_MAX_RETRIES        retries of a hold or registration the server refused with
//                              5xx/409+Retry-After (3)
//   RACECAP_RETRY_SCALE        multiplies those retries' Retry-After (default: the back-off
//                              scale; the chaos burst waits what the server says, 1)
//   RACECAP_PAGE_REFRESHES     race-page burst: refreshes per reader (5)
//   RACECAP_OUTCOMES           a JSONL file: one line per milestone and one per runner,
//                              read by tools/burst for its progress line and report
//   RACECAP_CODE               a discount code (e.g. posted on social media at the opening)
//   RACECAP_CODE_SHARE         the share of runners who have it and apply it once they hold
//                              a place (0): a code used up is no reason to leave, they pay in full
//   RACECAP_TEAM_SHARE         the share of runners who are a team's captain (0): they hold
//                              RACECAP_TEAM_SIZE places at once (POST .../teams, on an event
//                              that takes teams that size), fill in every member and pay once
//                              (POST /api/holds/{holdId}/team); too few places left for the
//                              team, the captain tries another event, then gives up (unplaced)
//   RACECAP_TEAM_SIZE          the team's size (4)
//
// Counters it emits (all start at 0, so `ensure` conditions can name them):
//   racecap.runners.{arrived,held,unplaced,registered,confirmed,not_confirmed}
//   racecap.server_errors (5xx answers but a 503 with Retry-After),
//   racecap.retry_later (429/503 with Retry-After), racecap.retries, racecap.polls
//   racecap.api_errors.<request>.<CODE> (the API's error codes, e.g. SOLD_OUT)
//   racecap.payments.{declined,three_ds,provider_429,busy_429}: declines seen in the card
//   form, 3-D Secure challenges, the provider's own 429s to the card form, and the API's
//   429 + Retry-After on the registration and confirm routes (its provider budget)

const fs = require('node:fs');
const crypto = require('node:crypto');

function num(name, fallback) {
  const raw = process.env[name];
  const value = Number(raw);
  return raw !== undefined && raw !== '' && Number.isFinite(value) ? value : fallback;
}

const CFG = {
  raceId: process.env.RACECAP_RACE_ID || '',
  eventId: process.env.RACECAP_EVENT_ID || '',
  thinkMin: num('RACECAP_THINK_MIN_S', 15),
  thinkMax: num('RACECAP_THINK_MAX_S', 60),
  backoffScale: num('RACECAP_BACKOFF_SCALE', 1),
  confirmTimeout: num('RACECAP_CONFIRM_TIMEOUT_S', 600),
  payRetry: num('RACECAP_PAY_RETRY_S', 1),
  refreshes: num('RACECAP_PAGE_REFRESHES', 5),
  maxRetries: num('RACECAP_MAX_RETRIES', 3),
  code: process.env.RACECAP_CODE || '',
  codeShare: num('RACECAP_CODE_SHARE', 0),
  teamShare: num('RACECAP_TEAM_SHARE', 0),
  teamSize: num('RACECAP_TEAM_SIZE', 4),
  retryScale: num('RACECAP_RETRY_SCALE', num('RACECAP_BACKOFF_SCALE', 1)),
  // A 429 with Retry-After is the API saying "your place is kept, ask again then": a runner
  // keeps asking (the site does), so its budget is larger than for 5xx answers.
  maxBusyRetries: 40,
  maxCardTries: 25,
};

// Stripe's test PaymentMethods (the stand-in knows them; on a stage in test mode, Stripe).
const GOOD_CARD = 'pm_card_visa';
const CARD_CYCLE = new Map([
  [0, 'pm_card_chargeDeclined'],
  [10, 'pm_card_chargeDeclinedInsufficientFunds'],
  [5, 'pm_card_authenticationRequired'],
]);
let arrivals = 0;
const PAY_COUNTERS = ['declined', 'three_ds', 'provider_429', 'busy_429'];
const CODE_COUNTERS = ['tried', 'applied', 'used_up'];
const TEAM_COUNTERS = ['captains', 'held', 'too_few_places'];

const COUNTERS = ['arrived', 'held', 'unplaced', 'registered', 'confirmed', 'not_confirmed'];
const FIRST = ['Ada', 'Grace', 'Alan', 'Katherine', 'Edsger', 'Barbara', 'Donald', 'Frances', 'Ken', 'Radia'];
const LAST = ['Lovelace', 'Hopper', 'Turing', 'Johnson', 'Dijkstra', 'Liskov', 'Knuth', 'Allen', 'Thompson', 'Perlman'];

let outFd = null;
function record(line) {
  if (!process.env.RACECAP_OUTCOMES) return;
  if (outFd === null) outFd = fs.openSync(process.env.RACECAP_OUTCOMES, 'a');
  fs.writeSync(outFd, JSON.stringify(line) + '\n');
}

function pick(list) {
  return list[Math.floor(Math.random() * list.length)];
}

function parse(res) {
  if (!res || typeof res.body !== 'string' || res.body === '') return {};
  try {
    return JSON.parse(res.body);
  } catch {
    return {};
  }
}

function retryAfter(res, fallback) {
  const value = Number(res && res.headers && res.headers['retry-after']);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

function retryable(res) {
  if (!res) return true;
  const s = res.statusCode;
  return s === 429 || s >= 500 || (s === 409 && res.headers['retry-after'] !== undefined);
}

// A 429 or 503 that says when to come back (Retry-After) is the API asking the runner to
// wait, as the product promises under load or while a dependency recovers: counted as
// racecap.retry_later, not as a server error. Any other 5xx is one (the chaos burst also
// refuses a 429 without Retry-After from the API). Every answer is also a line in the outcomes file (status, latency):
// the chaos burst's report puts them on its timeline of faults.
function countAnswer(name, res, body, events) {
  const s = res.statusCode;
  const told = res.headers && res.headers['retry-after'] !== undefined;
  if ((s === 429 || s === 503) && told) {
    events.emit('counter', 'racecap.retry_later', 1);
  } else if (s >= 500) {
    events.emit('counter', 'racecap.server_errors', 1);
  }
  const phases = res.timings && res.timings.phases;
  record({
    e: 'req',
    t: Date.now(),
    name,
    status: s,
    ms: phases && Number.isFinite(phases.total) ? phases.total : null,
    retryAfter: told ? res.headers['retry-after'] : null,
    timing: serverTiming(res),
  });
  if (s >= 400 && body.error) {
    events.emit('counter', `racecap.api_errors.${name}.${body.error}`, 1);
  }
}

// The local gateway's Server-Timing (local/runtime.py Timing): where the request's time
// went on the server ({gateway, handler, 'sdk-sleep', ...} in ms); null elsewhere.
function serverTiming(res) {
  const raw = res.headers && res.headers['server-timing'];
  if (typeof raw !== 'string') return null;
  const out = {};
  for (const part of raw.split(',')) {
    const m = /^\s*([\w-]+);(?:dur|desc)=([\d.]+)/.exec(part);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

function sleep(seconds, done) {
  setTimeout(done, Math.max(0, seconds * 1000));
}

// -- the runner's steps ----------------------------------------------------------------------
function newRunner(context, events, done) {
  for (const c of COUNTERS) events.emit('counter', `racecap.runners.${c}`, 0);
  for (const c of ['racecap.server_errors', 'racecap.retry_later', 'racecap.retries', 'racecap.polls']) events.emit('counter', c, 0);
  for (const c of PAY_COUNTERS) events.emit('counter', `racecap.payments.${c}`, 0);
  for (const c of CODE_COUNTERS) events.emit('counter', `racecap.codes.${c}`, 0);
  for (const c of TEAM_COUNTERS) events.emit('counter', `racecap.teams.${c}`, 0);
  const id = crypto.randomUUID();
  const v = context.vars;
  v.runnerId = id;
  v.raceId = v.raceId || CFG.raceId;
  v.email = `runner-${id}@example.com`;
  v.firstName = pick(FIRST);
  v.lastName = pick(LAST);
  const year = 1950 + Math.floor(Math.random() * 55);
  const month = String(1 + Math.floor(Math.random() * 12)).padStart(2, '0');
  const day = String(1 + Math.floor(Math.random() * 28)).padStart(2, '0');
  v.dateOfBirth = `${year}-${month}-${day}`;
  v.card = CARD_CYCLE.get(arrivals % 20) || GOOD_CARD;
  v.firstCard = v.card;
  arrivals += 1;
  v.tries = 0;
  // A captain enters a whole team (no code: codes are for single entries).
  v.team = CFG.teamShare > 0 && Math.random() < CFG.teamShare ? CFG.teamSize : 0;
  if (v.team) events.emit('counter', 'racecap.teams.captains', 1);
  // Typed as a runner would: the case they heard it in (codes are compared in capitals).
  v.code = !v.team && CFG.code && Math.random() < CFG.codeShare ? CFG.code.toLowerCase() : '';
  v.t0 = Date.now();
  events.emit('counter', 'racecap.runners.arrived', 1);
  record({ e: 'arrive', t: v.t0 });
  return done();
}

function pickEvent(req, res, context, events, done) {
  const body = parse(res);
  countAnswer('race', res, body, events);
  const v = context.vars;
  // A race page answered 429/503 with Retry-After (a throttled read under faults): the runner
  // reloads when it says, as a person would (the flows that loop on pageRetrying).
  v.pageTries = (v.pageTries || 0) + 1;
  v.pageAgain = retryable(res) && v.pageTries <= CFG.maxBusyRetries;
  if (v.pageAgain) v.wait = retryAfter(res, 1);
  if (res.statusCode !== 200) return done();
  if (CFG.eventId) {
    v.eventId = CFG.eventId;
    return done();
  }
  const open = (body.events || []).filter(
    (e) => e.status === 'OPEN' && e.spotsLeft >= (v.team || 1) && (!v.team || (e.teamMaxSize || 0) >= v.team),
  );
  if (open.length === 0) {
    v.outcome = 'unplaced';
    v.outcomeCode = 'SOLD_OUT_PAGE';
    return done();
  }
  v.openEvents = open.map((e) => ({ eventId: e.eventId, spotsLeft: e.spotsLeft }));
  v.eventId = weightedPick(v.openEvents);
  return done();
}

// Runners spread over the distances in proportion to the places left.
function weightedPick(events) {
  const total = events.reduce((n, e) => n + e.spotsLeft, 0);
  let r = Math.random() * total;
  for (const e of events) {
    r -= e.spotsLeft;
    if (r <= 0) return e.eventId;
  }
  return events[events.length - 1].eventId;
}

function afterHold(req, res, context, events, done) {
  const body = parse(res);
  countAnswer('hold', res, body, events);
  const v = context.vars;
  v.tries += 1;
  if (res.statusCode === 201 && body.holdId) {
    v.holdId = body.holdId;
    v.tHeld = Date.now();
    v.again = false;
    events.emit('counter', 'racecap.runners.held', 1);
    if (v.team) events.emit('counter', 'racecap.teams.held', 1);
    record({ e: 'held', t: v.tHeld });
  } else if (retryable(res) && v.tries <= CFG.maxRetries) {
    v.again = true;
    v.wait = retryAfter(res, 1);
    events.emit('counter', 'racecap.retries', 1);
  } else if (body.error === 'NOT_ENOUGH_PLACES' && !CFG.eventId && otherEvent(v)) {
    // Too few places left for the whole team here (the event is not sold out): another event.
    events.emit('counter', 'racecap.teams.too_few_places', 1);
    v.again = true;
    v.wait = 0;
  } else if (body.error === 'SOLD_OUT' && !CFG.eventId && otherEvent(v)) {
    // This distance filled up while the runner read the page: they pick another one.
    v.again = true;
    v.wait = 0;
  } else {
    v.again = false;
    v.outcome = 'unplaced';
    v.outcomeCode = body.error || `HTTP_${res.statusCode}`;
  }
  return done();
}

// The code field on the hold page: applied once the place is held, before the details.
function afterCode(req, res, context, events, done) {
  const body = parse(res);
  countAnswer('code', res, body, events);
  const v = context.vars;
  v.tries += 1;
  if (res.statusCode === 200) {
    v.code = '';
    v.again = false;
    events.emit('counter', 'racecap.codes.applied', 1);
  } else if (retryable(res) && v.tries <= CFG.maxBusyRetries) {
    v.again = true;
    v.wait = retryAfter(res, 1);
    events.emit('counter', 'racecap.retries', 1);
  } else {
    // Used up (or any refusal): the runner carries on at the full price.
    if (body.error === 'CODE_USED_UP') events.emit('counter', 'racecap.codes.used_up', 1);
    v.code = '';
    v.again = false;
  }
  return done();
}

function hasCode(vars) {
  return Boolean(vars.holdId) && Boolean(vars.code);
}

function startCode(context, events, done) {
  context.vars.tries = 0;
  if (hasCode(context.vars)) events.emit('counter', 'racecap.codes.tried', 1);
  return done();
}

function otherEvent(v) {
  v.openEvents = (v.openEvents || []).filter((e) => e.eventId !== v.eventId);
  if (v.openEvents.length === 0) return false;
  v.eventId = weightedPick(v.openEvents);
  return true;
}

function think(context, events, done) {
  if (!context.vars.holdId) return done();
  context.vars.tries = 0;
  const seconds = CFG.thinkMin + Math.random() * Math.max(0, CFG.thinkMax - CFG.thinkMin);
  return sleep(seconds, done);
}

function afterRegister(req, res, context, events, done) {
  const body = parse(res);
  countAnswer('register', res, body, events);
  const v = context.vars;
  v.tries += 1;
  if (res.statusCode === 202 && body.registrationId) {
    registered(v, events, body, res);
  } else if (res.statusCode === 200 && body.clientSecret) {
    // Payment required: the card form, for the hold's one PaymentIntent.
    v.again = false;
    v.tries = 0;
    v.clientSecret = body.clientSecret;
    v.intentId = body.clientSecret.split('_secret_')[0];
    v.publishableKey = body.publishableKey;
    v.providerOrigin = new URL(body.paymentsScript).origin;
    v.paid = false;
  } else if (busy(res, v, events)) {
    // 429 + Retry-After: the provider's budget is spent for now; the place stays held.
  } else if (retryable(res) && v.tries <= CFG.maxRetries) {
    v.again = true;
    v.wait = retryAfter(res, 1);
    events.emit('counter', 'racecap.retries', 1);
  } else {
    v.again = false;
    v.outcome = 'not_confirmed';
    v.outcomeCode = body.error || `HTTP_${res.statusCode}`;
    v.detail = { status: res.statusCode, message: body.message, fields: body.fields, tries: v.tries };
  }
  return done();
}

function registered(v, events, body, res) {
  v.registrationId = body.registrationId;
  v.tRegistered = Date.now();
  v.again = false;
  v.polls = 0;
  // The 202's Retry-After: when the writer will likely have it (the site's first check too).
  v.firstWait = retryAfter(res, null);
  events.emit('counter', 'racecap.runners.registered', 1);
  record({ e: 'registered', t: v.tRegistered });
  if (body.status === 'CONFIRMED') confirmed(v, events, body);
}

// The API's 429 or 503 with Retry-After: wait what it says (unscaled: it is the server's word,
// not the waiting screen's pace) and ask again, within a generous budget. The site does the
// same (api.js withBusyRetry: 429 and 503 are "busy", one budget for both). A 503 + Retry-After
// is a request whose time budget ran out in retries, its place kept (racecap/http.py): counting
// it against the few tries kept for other 5xx made a runner give up after three 429s and one
// 503 (1 of 450 in a chaos burst), where a runner on the site would have gone on.
function busy(res, v, events) {
  const s = res.statusCode;
  if ((s !== 429 && s !== 503) || res.headers['retry-after'] === undefined) return false;
  if (s === 429) events.emit('counter', 'racecap.payments.busy_429', 1);
  v.busy = (v.busy || 0) + 1;
  if (v.busy > CFG.maxBusyRetries) return false;
  v.again = true;
  v.wait = retryAfter(res, 1);
  v.unscaled = true;
  events.emit('counter', 'racecap.retries', 1);
  return true;
}

// -- the card form: what Stripe.js does for the page ------------------------------------------
async function provider(v, path, params) {
  const res = await fetch(v.providerOrigin + path, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${v.publishableKey}`,
      'Content-Type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ client_secret: v.clientSecret, ...params }).toString(),
  });
  let body = {};
  try {
    body = await res.json();
  } catch {
    body = {};
  }
  return { status: res.status, body };
}

const pause = (seconds) => new Promise((resolve) => setTimeout(resolve, Math.max(0, seconds * 1000)));

// Pays the hold's intent with the runner's card until it succeeds: a decline keeps the
// runner on the form and they type a good card; 3-D Secure is approved on the challenge
// page; the provider's own 429 (the card form shows an error) is a click on "Pay" again.
async function payAtProvider(context, events) {
  const v = context.vars;
  if (!v.clientSecret || v.paid || v.outcome) return;
  for (let tries = 1; ; tries += 1) {
    if (tries > CFG.maxCardTries) {
      v.outcome = 'not_confirmed';
      v.outcomeCode = 'CARD_FORM_GAVE_UP';
      return;
    }
    let answer;
    try {
      answer = await provider(v, `/v1/payment_intents/${v.intentId}/confirm`, { payment_method: v.card });
    } catch (err) {
      await pause(CFG.payRetry); // the provider did not answer: the card form says so, the runner tries again
      continue;
    }
    const intent = answer.body.error ? answer.body.error.payment_intent || {} : answer.body;
    if (answer.status === 429) {
      events.emit('counter', 'racecap.payments.provider_429', 1);
      await pause(CFG.payRetry);
    } else if (intent.status === 'succeeded' || intent.status === 'processing') {
      v.paid = true;
      return;
    } else if (intent.status === 'requires_action') {
      events.emit('counter', 'racecap.payments.three_ds', 1);
      await pause(CFG.thinkMin / 4); // the bank's page, read and approved
      const done = await provider(v, `/3ds/${v.intentId}`, { outcome: 'approve' });
      if (done.status === 200 && done.body.status === 'succeeded') {
        v.paid = true;
        return;
      }
    } else if (answer.status === 402 || (intent.status === 'requires_payment_method' && intent.last_payment_error)) {
      events.emit('counter', 'racecap.payments.declined', 1);
      v.declines = (v.declines || 0) + 1;
      v.card = GOOD_CARD; // "Your place is still held: try another card."
      await pause(CFG.thinkMin / 4);
    } else {
      v.outcome = 'not_confirmed';
      v.outcomeCode = `PROVIDER_${answer.status}_${intent.status || (answer.body.error || {}).code || ''}`;
      return;
    }
  }
}

function afterConfirm(req, res, context, events, done) {
  const body = parse(res);
  countAnswer('confirm', res, body, events);
  const v = context.vars;
  v.tries += 1;
  if (res.statusCode === 202 && body.registrationId) {
    registered(v, events, body, res);
  } else if (busy(res, v, events)) {
    // the provider's budget: the place stays held, ask again after Retry-After
  } else if (retryable(res) && v.tries <= CFG.maxRetries * 4) {
    // 409 PAYMENT_PENDING + Retry-After (the bank still deciding) or a 5xx
    v.again = true;
    v.wait = retryAfter(res, 1);
    events.emit('counter', 'racecap.retries', 1);
  } else {
    v.again = false;
    v.outcome = 'not_confirmed';
    v.outcomeCode = body.error || `HTTP_${res.statusCode}`;
    v.detail = { status: res.statusCode, message: body.message, tries: v.tries, card: v.firstCard };
  }
  return done();
}

function confirmed(v, events, body) {
  v.tConfirmed = Date.now();
  v.bib = body.bib;
  v.outcome = 'confirmed';
  events.emit('counter', 'racecap.runners.confirmed', 1);
  events.emit('histogram', 'racecap.hold_to_confirmation_ms', v.tConfirmed - v.tHeld);
  record({ e: 'confirmed', t: v.tConfirmed });
}

// Retry a hold or registration the server asked to retry (429, 5xx, 409 + Retry-After).
function backoffBeforeRetry(context, events, done) {
  const v = context.vars;
  if (!v.again) return done();
  const scale = v.unscaled ? 1 : CFG.retryScale;
  v.unscaled = false;
  return sleep(v.wait * scale, done);
}

// The waiting screen, as the site's: the first check when the registration's own 202 said
// (its Retry-After), then whatever each status answer's Retry-After says, as said: the
// writer's backlog in real seconds. Without one, the paper's first 10 s (scaled).
function waitingScreen(context, events, done) {
  const v = context.vars;
  if (!v.registrationId || v.outcome) return done();
  if (v.polls > 0) return sleep(v.nextWait, done);
  return sleep(v.firstWait != null ? v.firstWait : 10 * CFG.backoffScale, done);
}

function afterStatus(req, res, context, events, done) {
  const body = parse(res);
  countAnswer('status', res, body, events);
  const v = context.vars;
  v.polls += 1;
  events.emit('counter', 'racecap.polls', 1);
  if (res.statusCode === 200 && body.status === 'CONFIRMED') {
    confirmed(v, events, body);
  } else if (res.statusCode === 200 && body.status === 'FAILED') {
    v.outcome = 'not_confirmed';
    v.outcomeCode = 'FAILED';
  } else {
    v.nextWait = retryAfter(res, 10);
  }
  if (!v.outcome && (Date.now() - v.tRegistered) / 1000 > CFG.confirmTimeout) {
    v.outcome = 'not_confirmed';
    v.outcomeCode = 'TIMEOUT';
  }
  return done();
}

function finish(context, events, done) {
  const v = context.vars;
  let outcome = v.outcome;
  if (!outcome) outcome = v.holdId ? 'not_confirmed' : 'unplaced';
  if (outcome === 'not_confirmed') events.emit('counter', 'racecap.runners.not_confirmed', 1);
  if (outcome === 'unplaced') events.emit('counter', 'racecap.runners.unplaced', 1);
  record({
    e: 'runner',
    outcome,
    code: v.outcomeCode || null,
    eventId: v.eventId || null,
    places: v.team || 1,
    registrationId: v.registrationId || null,
    bib: v.bib === undefined ? null : v.bib,
    t0: v.t0,
    held: v.tHeld || null,
    registered: v.tRegistered || null,
    confirmed: v.tConfirmed || null,
    polls: v.polls || 0,
    card: v.firstCard || null,
    declines: v.declines || 0,
    email: outcome === 'not_confirmed' ? v.email : undefined,
    detail: v.detail,
  });
  return done();
}

// -- conditions (ifTrue / whileTrue) ----------------------------------------------------------
function hasEvent(vars) {
  return Boolean(vars.eventId) && !vars.holdId && !vars.outcome;
}
function hasHold(vars) {
  return Boolean(vars.holdId) && !vars.clientSecret && !vars.registrationId && !vars.outcome;
}
function mustConfirm(vars) {
  return Boolean(vars.paid) && !vars.registrationId && !vars.outcome;
}
function hasRegistration(vars) {
  return Boolean(vars.registrationId) && !vars.outcome;
}
function pageRetrying(context, next) {
  return next(Boolean(context.vars.pageAgain));
}
function pageBackoff(context, events, done) {
  const v = context.vars;
  return v.pageAgain ? sleep(v.wait * CFG.retryScale, done) : done();
}
function retrying(context, next) {
  return next(Boolean(context.vars.again));
}
function stillWaiting(context, next) {
  return next(Boolean(context.vars.registrationId) && !context.vars.outcome);
}

// -- the race-page read burst ---------------------------------------------------------------
function newReader(context, events, done) {
  for (const c of ['racecap.server_errors', 'racecap.readers.done']) events.emit('counter', c, 0);
  context.vars.raceId = context.vars.raceId || CFG.raceId;
  context.vars.refreshes = CFG.refreshes;
  record({ e: 'arrive', t: Date.now() });
  return done();
}

function afterRead(req, res, context, events, done) {
  countAnswer('race', res, parse(res), events);
  return done();
}

function refreshPause(context, events, done) {
  return sleep(CFG.thinkMin + Math.random() * Math.max(0, CFG.thinkMax - CFG.thinkMin), done);
}

function readerDone(context, events, done) {
  events.emit('counter', 'racecap.readers.done', 1);
  record({ e: 'runner', outcome: 'reader', t0: Date.now() });
  return done();
}

// RACECAP_ANSWERS (JSON): the answers to the race's registration questions every runner sends
// (tools/burst/stack.seed_questions); unset, the details are sent as before.
const ANSWERS = process.env.RACECAP_ANSWERS ? JSON.parse(process.env.RACECAP_ANSWERS) : null;
function withAnswers(requestParams, context, events, done) {
  const v = context.vars;
  if (v.team && requestParams.json) {
    // The captain's form: every member's details (the captain first), then one payment.
    const me = requestParams.json;
    const members = [me];
    for (let i = 1; i < v.team; i += 1) {
      members.push({ ...me, email: `member${i}-${v.runnerId}@example.com`, firstName: pick(FIRST), lastName: pick(LAST) });
    }
    if (ANSWERS) for (const m of members) m.answers = ANSWERS;
    requestParams.url = requestParams.url.replace(/\/registration$/, '/team');
    requestParams.json = { teamName: `Team ${v.runnerId.slice(0, 8)}`, members };
    return done();
  }
  if (ANSWERS && requestParams.json) requestParams.json.answers = ANSWERS;
  return done();
}

// A captain holds the team's places together: the team route, with its size.
function teamHold(requestParams, context, events, done) {
  const v = context.vars;
  if (v.team) {
    requestParams.url = requestParams.url.replace(/\/holds$/, '/teams');
    requestParams.json = { places: v.team };
  }
  return done();
}

module.exports = {
  withAnswers,
  teamHold,
  // helpers the fairness scenarios' clients share (fairness.js, queue.js)
  parse,
  retryAfter,
  countAnswer,
  record,
  otherEvent,
  newRunner,
  pickEvent,
  afterHold,
  startCode,
  afterCode,
  hasCode,
  think,
  afterRegister,
  payAtProvider,
  afterConfirm,
  mustConfirm,
  backoffBeforeRetry,
  waitingScreen,
  afterStatus,
  finish,
  hasEvent,
  hasHold,
  hasRegistration,
  retrying,
  pageRetrying,
  pageBackoff,
  stillWaiting,
  newReader,
  afterRead,
  refreshPause,
  readerDone,
};
