'use strict';
// Racecap's burst runners, for Artillery 2 (see the scenarios in this folder).
//
// Each virtual user is one runner with a unique identity. The flow is the one the site
// follows: race page -> hold a place -> fill in the form (think) -> register and pay ->
// the waiting screen, which polls the registration with the server's back-off
// (Retry-After 10, 20, 40, 60 s) until it is CONFIRMED.
//
// Configuration comes from the environment (tools/burst sets it; defaults are the
// paper's realistic values):
//   RACECAP_RACE_ID            the race (required)
//   RACECAP_EVENT_ID           one event for everyone (default: pick among open events,
//                              weighted by places left, as runners spread over distances)
//   RACECAP_THINK_MIN_S/MAX_S  time spent on the form, uniform in [min, max] (15..60)
//   RACECAP_BACKOFF_SCALE      multiplies every waiting-screen wait (1 = real; the local
//                              burst uses less and says so in its report)
//   RACECAP_CONFIRM_TIMEOUT_S  a runner gives up waiting after this long (600)
//   RACECAP_PAYMENT_METHOD      the card (pm_card_visa)
//   RACECAP_PAGE_REFRESHES     race-page burst: refreshes per reader (5)
//   RACECAP_OUTCOMES           a JSONL file: one line per milestone and one per runner,
//                              read by tools/burst for its progress line and report
//
// Counters it emits (all start at 0, so `ensure` conditions can name them):
//   racecap.runners.{arrived,held,unplaced,registered,confirmed,not_confirmed}
//   racecap.server_errors (5xx answers), racecap.retries, racecap.polls
//   racecap.api_errors.<request>.<CODE> (the API's error codes, e.g. SOLD_OUT)

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
  token: process.env.RACECAP_PAYMENT_METHOD || 'pm_card_visa',
  refreshes: num('RACECAP_PAGE_REFRESHES', 5),
  maxRetries: 3,
};

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

function countAnswer(name, res, body, events) {
  if (res.statusCode >= 500) events.emit('counter', 'racecap.server_errors', 1);
  if (res.statusCode >= 400 && body.error) {
    events.emit('counter', `racecap.api_errors.${name}.${body.error}`, 1);
  }
}

function sleep(seconds, done) {
  setTimeout(done, Math.max(0, seconds * 1000));
}

// -- the runner's steps ----------------------------------------------------------------------
function newRunner(context, events, done) {
  for (const c of COUNTERS) events.emit('counter', `racecap.runners.${c}`, 0);
  for (const c of ['racecap.server_errors', 'racecap.retries', 'racecap.polls']) events.emit('counter', c, 0);
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
  v.paymentMethod = CFG.token;
  v.tries = 0;
  v.t0 = Date.now();
  events.emit('counter', 'racecap.runners.arrived', 1);
  record({ e: 'arrive', t: v.t0 });
  return done();
}

function pickEvent(req, res, context, events, done) {
  const body = parse(res);
  countAnswer('race', res, body, events);
  const v = context.vars;
  if (res.statusCode !== 200) return done();
  if (CFG.eventId) {
    v.eventId = CFG.eventId;
    return done();
  }
  const open = (body.events || []).filter((e) => e.status === 'OPEN' && e.spotsLeft > 0);
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
    record({ e: 'held', t: v.tHeld });
  } else if (retryable(res) && v.tries <= CFG.maxRetries) {
    v.again = true;
    v.wait = retryAfter(res, 1);
    events.emit('counter', 'racecap.retries', 1);
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
    v.registrationId = body.registrationId;
    v.tRegistered = Date.now();
    v.again = false;
    v.polls = 0;
    events.emit('counter', 'racecap.runners.registered', 1);
    record({ e: 'registered', t: v.tRegistered });
    if (body.status === 'CONFIRMED') confirmed(v, events, body);
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
  if (!context.vars.again) return done();
  return sleep(context.vars.wait * CFG.backoffScale, done);
}

// The waiting screen: the first check after 10 s, then whatever Retry-After says.
function waitingScreen(context, events, done) {
  const v = context.vars;
  if (!v.registrationId || v.outcome) return done();
  const wait = v.polls === 0 ? 10 : v.nextWait;
  return sleep(wait * CFG.backoffScale, done);
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
    registrationId: v.registrationId || null,
    bib: v.bib === undefined ? null : v.bib,
    t0: v.t0,
    held: v.tHeld || null,
    registered: v.tRegistered || null,
    confirmed: v.tConfirmed || null,
    polls: v.polls || 0,
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
  return Boolean(vars.holdId) && !vars.registrationId && !vars.outcome;
}
function hasRegistration(vars) {
  return Boolean(vars.registrationId) && !vars.outcome;
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

module.exports = {
  newRunner,
  pickEvent,
  afterHold,
  think,
  afterRegister,
  backoffBeforeRetry,
  waitingScreen,
  afterStatus,
  finish,
  hasEvent,
  hasHold,
  hasRegistration,
  retrying,
  stillWaiting,
  newReader,
  afterRead,
  refreshPause,
  readerDone,
};
