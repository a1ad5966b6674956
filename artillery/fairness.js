'use strict';
// The fairness scenarios' clients (bots.yml), for Artillery 2. Honest runners reuse the
// burst runners' steps (processor.js); each has its own device token and its own address.
//
// Who a client is: the local gateway trusts `CloudFront-Viewer-Address` as CloudFront's
// (identity.py), so each virtual user plays one address. Roles, per Artillery worker:
//   the 1st client   - the token bot: ONE device token, RACECAP_BOT_TRIES holds as fast as
//                      answered (it ignores Retry-After, as a script would);
//   the 2nd client   - the address bot: ONE address cycling RACECAP_BOT_TOKENS fresh device
//                      tokens, one hold each (it honours Retry-After, or the rate limit
//                      would stop it long before its hold ceiling);
//   everyone else    - an honest runner: device token, race page, one hold (retried when
//                      told to); a place or a clear sold out.
// With several workers each plays both bots, but on the SAME identities
// (RACECAP_BOT_DEVICE_TOKEN / RACECAP_BOT_ADDRESS, set by tools/burst), so the limits under
// test are still one device's and one address's.
//
// Counters: racecap.bots.{token,address}.{held,too_many,rate_limited,tries}, and the
// runners' racecap.runners.{arrived,held,sold_out,refused} (refused: anything else).

const crypto = require('node:crypto');
const base = require('./processor.js');

function num(name, fallback) {
  const value = Number(process.env[name]);
  return process.env[name] && Number.isFinite(value) ? value : fallback;
}

const BOT = {
  tries: num('RACECAP_BOT_TRIES', 50),
  tokens: num('RACECAP_BOT_TOKENS', 500),
  token: process.env.RACECAP_BOT_DEVICE_TOKEN || '',
  address: process.env.RACECAP_BOT_ADDRESS || '203.0.113.66',
  tokenAddress: process.env.RACECAP_TOKEN_BOT_ADDRESS || '203.0.113.44',
};
const COUNTERS = [
  'racecap.runners.arrived',
  'racecap.runners.held',
  'racecap.runners.sold_out',
  'racecap.runners.refused',
  'racecap.server_errors',
  ...['token', 'address'].flatMap((b) =>
    ['held', 'too_many', 'rate_limited', 'tries'].map((c) => `racecap.bots.${b}.${c}`),
  ),
];

let clients = 0;

function honestAddress() {
  // 198.18.0.0/15 is set aside for benchmarks: never a bot's address.
  const b = crypto.randomBytes(3);
  return `198.${18 + (b[0] & 1)}.${b[1]}.${b[2]}`;
}

function newClient(context, events, done) {
  for (const c of COUNTERS) events.emit('counter', c, 0);
  const v = context.vars;
  v.raceId = v.raceId || process.env.RACECAP_RACE_ID;
  v.role = ['tokenBot', 'addressBot'][clients] || 'runner';
  clients += 1;
  v.tries = 0;
  v.left = v.role === 'tokenBot' ? BOT.tries : v.role === 'addressBot' ? BOT.tokens : 1;
  v.address = v.role === 'tokenBot' ? BOT.tokenAddress : v.role === 'addressBot' ? BOT.address : honestAddress();
  v.deviceToken = v.role === 'tokenBot' ? BOT.token : '';
  if (v.role === 'runner') events.emit('counter', 'racecap.runners.arrived', 1);
  return done();
}

// -- conditions ---------------------------------------------------------------------------------
function needsDevice(vars) {
  return !vars.deviceToken && !vars.outcome;
}
function needsPage(vars) {
  return !vars.eventId && !vars.outcome;
}
function mayHold(vars) {
  return Boolean(vars.eventId && vars.deviceToken) && !vars.holdId && !vars.outcome;
}
function goesOn(context, next) {
  const v = context.vars;
  if (v.role === 'runner') return next(Boolean(v.again));
  return next(v.left > 0 && !v.outcome);
}

// -- steps ----------------------------------------------------------------------------------------
function afterDevice(req, res, context, events, done) {
  const body = base.parse(res);
  const v = context.vars;
  if (res.statusCode === 201 && body.deviceToken) {
    v.deviceToken = body.deviceToken;
    v.again = false;
  } else if (res.statusCode === 429) {
    if (v.role === 'addressBot') events.emit('counter', 'racecap.bots.address.rate_limited', 1);
    v.again = true;
    v.wait = base.retryAfter(res, 1);
  } else {
    if (res.statusCode >= 500) events.emit('counter', 'racecap.server_errors', 1);
    v.outcome = v.role === 'runner' ? 'refused' : v.outcome;
    v.outcomeCode = body.error || `HTTP_${res.statusCode}`;
  }
  return done();
}

function botWait(context, events, done) {
  const v = context.vars;
  // Only the address bot and honest runners honour Retry-After; the token bot hammers.
  if (!v.again || v.role === 'tokenBot') return done();
  v.again = false;
  return setTimeout(done, v.wait * 1000 * (v.role === 'runner' ? num('RACECAP_BACKOFF_SCALE', 1) : 1));
}

function afterClientHold(req, res, context, events, done) {
  const v = context.vars;
  if (v.role === 'runner') {
    return base.afterHold(req, res, context, events, () => {
      if (v.outcome === 'unplaced') {
        const clear = v.outcomeCode === 'SOLD_OUT' || v.outcomeCode === 'SOLD_OUT_PAGE';
        v.outcome = clear ? 'sold_out' : 'refused';
      }
      return done();
    });
  }
  const body = base.parse(res);
  const bot = v.role === 'tokenBot' ? 'token' : 'address';
  events.emit('counter', `racecap.bots.${bot}.tries`, 1);
  if (res.statusCode >= 500) events.emit('counter', 'racecap.server_errors', 1);
  if (res.statusCode === 201) events.emit('counter', `racecap.bots.${bot}.held`, 1);
  if (body.error === 'TOO_MANY_HOLDS') events.emit('counter', `racecap.bots.${bot}.too_many`, 1);
  if (body.error === 'SOLD_OUT' && !base.otherEvent(v)) v.outcome = 'sold_out';
  if (res.statusCode === 429 && body.error !== 'TOO_MANY_HOLDS') events.emit('counter', `racecap.bots.${bot}.rate_limited`, 1);
  if (res.statusCode === 429 && body.error !== 'TOO_MANY_HOLDS' && bot === 'address') {
    v.again = true; // the address bot waits and tries this token again
    v.wait = base.retryAfter(res, 1);
    return done();
  }
  v.left -= 1;
  if (bot === 'address') v.deviceToken = ''; // the next hold on a fresh token
  return done();
}

function clientDone(context, events, done) {
  const v = context.vars;
  if (v.role !== 'runner') return done();
  const soldOut = v.outcome === 'sold_out' || (v.outcome === 'unplaced' && v.outcomeCode === 'SOLD_OUT_PAGE');
  if (v.holdId) return done(); // afterHold counted racecap.runners.held
  if (soldOut) events.emit('counter', 'racecap.runners.sold_out', 1);
  else events.emit('counter', 'racecap.runners.refused', 1);
  return done();
}

module.exports = {
  newClient,
  needsDevice,
  needsPage,
  mayHold,
  goesOn,
  afterDevice,
  botWait,
  pickEvent: base.pickEvent,
  afterClientHold,
  clientDone,
};
