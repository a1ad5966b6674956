'use strict';
// The opening queue's runners (opening-queue.yml), for Artillery 2. Each virtual user is one
// runner on an address of their own (the local gateway trusts `CloudFront-Viewer-Address`,
// as it trusts CloudFront's), with a device token, doing what the site's waiting room does:
//
//   POST /api/device                      a signed device token (the first visit)
//   POST …/queue/challenge                the server's proof-of-work challenge
//   (solve it here: node's crypto)        the first decimal nonce whose SHA-256(challenge:nonce)
//                                         has `difficulty` leading zero bits
//   POST …/queue                          join with the proof: a queue token with the runner's
//                                         arrival number
//   GET  …/queue  (X-Racecap-Queue)       poll, waiting what each answer's Retry-After says;
//                                         once it has a number, the edge-cached
//   GET  …/queue/now-serving              between its own checks, as the site does, until the
//                                         number is reached: then ADMITTED (an admission token)
//   GET the race page, POST a hold with the admission token (X-Racecap-Admission); then a
//   share of those holding register and pay as the opening burst's runners do (processor.js).
//
// A share of the runners opens a second tab right after joining: the same device solves a
// fresh challenge and joins again; the answer must carry the same arrival number.
//
// Environment (tools/burst sets it; besides processor.js's own):
//   RACECAP_REGISTER_PERCENT    of the runners who hold a place, the share who register and pay (100)
//   RACECAP_SECOND_TAB_PERCENT  of the runners, the share who open a second tab (10)
//   RACECAP_QUEUE_TIMEOUT_S     a runner gives up waiting in the queue after this long (3600)
//   RACECAP_EDGE_URL            the cache in front of the API, for now-serving (default: the target)
//
// Counters: racecap.queue.{joined,admitted,expired,refused,sold_out,registering,
// second_tab_same,second_tab_new}, besides processor.js's racecap.runners.* (arrived, held,
// confirmed, ...). Every runner also writes one `{"e": "queue", …}` line to the outcomes file:
// when it sent its join (`joined`, ms), its arrival number, its admission number, when it
// saw ADMITTED, the second tab's arrival number; tools/burst/opening_queue.py reads them.

const crypto = require('node:crypto');
const base = require('./processor.js');

function num(name, fallback) {
  const raw = process.env[name];
  const value = Number(raw);
  return raw !== undefined && raw !== '' && Number.isFinite(value) ? value : fallback;
}

const CFG = {
  registerPercent: num('RACECAP_REGISTER_PERCENT', 100),
  secondTabPercent: num('RACECAP_SECOND_TAB_PERCENT', 10),
  queueTimeout: num('RACECAP_QUEUE_TIMEOUT_S', 3600),
  maxRetries: 40, // 429/5xx on the device, challenge and join calls, each waited out
};
const COUNTERS = ['joined', 'admitted', 'expired', 'refused', 'sold_out', 'registering', 'second_tab_same', 'second_tab_new'];

let runners = 0;
let holders = 0;

// Every k-th of a stream, exactly `percent` % of it (no randomness: a small run still gets some).
function share(k, percent) {
  return Math.floor(((k + 1) * percent) / 100) > Math.floor((k * percent) / 100);
}

function address() {
  // 198.18.0.0/15 is set aside for benchmarks.
  const b = crypto.randomBytes(3);
  return `198.${18 + (b[0] & 1)}.${b[1]}.${b[2]}`;
}

function claims(token) {
  try {
    return JSON.parse(Buffer.from(String(token).split('.')[1], 'base64url').toString());
  } catch {
    return {};
  }
}

function leadingZeroBits(digest) {
  let bits = 0;
  for (const byte of digest) {
    if (byte === 0) {
      bits += 8;
      continue;
    }
    return bits + Math.clz32(byte) - 24;
  }
  return bits;
}

// What the page's Web Worker does (site/pow.js), here with node's crypto.
function solve(challenge, difficulty) {
  for (let n = 0; ; n += 1) {
    const digest = crypto.createHash('sha256').update(`${challenge}:${n}`).digest();
    if (leadingZeroBits(digest) >= difficulty) return String(n);
  }
}

function newQueueRunner(context, events, done) {
  for (const c of COUNTERS) events.emit('counter', `racecap.queue.${c}`, 0);
  return base.newRunner(context, events, () => {
    const v = context.vars;
    v.address = address();
    v.secondTab = share(runners, CFG.secondTabPercent);
    runners += 1;
    v.step = 'tab1';
    v.edge = process.env.RACECAP_EDGE_URL || ''; // the cache in front of the API (now serving)
    v.retriesLeft = CFG.maxRetries;
    return done();
  });
}

// A 429/503 with Retry-After (or a 5xx): wait and ask again, within the budget; anything
// else ends the runner's visit, counted as refused.
function again(res, v, events) {
  const s = res.statusCode;
  if ((s === 429 || s >= 500) && v.retriesLeft > 0) {
    v.retriesLeft -= 1;
    v.again = true;
    v.wait = base.retryAfter(res, 1);
    return true;
  }
  return false;
}

function refused(v, events, code) {
  v.outcome = 'refused';
  v.outcomeCode = code;
  events.emit('counter', 'racecap.queue.refused', 1);
}

// The server's word: waited in full (not scaled, unlike the waiting screen's pace).
function waitAsTold(context, events, done) {
  const v = context.vars;
  if (!v.again) return done();
  v.again = false;
  return setTimeout(done, v.wait * 1000);
}

function needsDevice(vars) {
  return !vars.deviceToken && !vars.outcome;
}

function needsDeviceLoop(context, next) {
  return next(needsDevice(context.vars));
}

function afterDevice(req, res, context, events, done) {
  const v = context.vars;
  const body = base.parse(res);
  base.countAnswer('device', res, body, events);
  if (res.statusCode === 201 && body.deviceToken) v.deviceToken = body.deviceToken;
  else if (!again(res, v, events)) refused(v, events, body.error || `DEVICE_${res.statusCode}`);
  return done();
}

function needsChallenge(vars) {
  return (vars.step === 'tab1' || vars.step === 'tab2') && !vars.challenge && !vars.outcome && Boolean(vars.deviceToken);
}

function afterChallenge(req, res, context, events, done) {
  const v = context.vars;
  const body = base.parse(res);
  base.countAnswer('challenge', res, body, events);
  if (res.statusCode === 201 && body.challenge) {
    v.challenge = body.challenge;
    v.nonce = solve(body.challenge, body.difficulty);
    v.tJoin = Date.now(); // the join goes out now: the runner's place in the arrival order
  } else if (!again(res, v, events)) {
    refused(v, events, body.error || `CHALLENGE_${res.statusCode}`);
  }
  return done();
}

function hasProof(vars) {
  return Boolean(vars.challenge && vars.nonce) && !vars.outcome;
}

function afterJoin(req, res, context, events, done) {
  const v = context.vars;
  const body = base.parse(res);
  base.countAnswer('join', res, body, events);
  v.challenge = '';
  v.nonce = '';
  if (res.statusCode === 200 && body.queueToken) {
    const arrival = claims(body.queueToken).a;
    if (v.step === 'tab1') {
      v.queueToken = body.queueToken;
      v.arrival = arrival;
      v.joined = v.tJoin;
      v.answered = Date.now(); // joins answered before another was sent must keep that order
      base.record({ e: 'joined', t: Date.now() }); // tools/burst opens registration once the early ones are in
      v.pollWait = base.retryAfter(res, body.retryAfterSeconds || 1);
      events.emit('counter', 'racecap.queue.joined', 1);
      v.step = v.secondTab ? 'tab2' : 'joined';
    } else {
      v.tab2 = arrival;
      events.emit('counter', `racecap.queue.${arrival === v.arrival ? 'second_tab_same' : 'second_tab_new'}`, 1);
      v.step = 'joined';
    }
  } else if (!again(res, v, events)) {
    // 200 without a token is the queue saying it is off: this burst expects it on.
    refused(v, events, body.error || (res.statusCode === 200 ? `QUEUE_${body.state}` : `JOIN_${res.statusCode}`));
  }
  return done();
}

function joining(context, next) {
  const v = context.vars;
  return next(!v.outcome && (Boolean(v.again) || v.step !== 'joined'));
}

// The waiting room: poll when the last answer said to (Retry-After), until admitted.
// Jittered upwards as the site jitters (so a crowd that joined together does not poll in
// step), never below what the server said.
function queueWait(context, events, done) {
  const v = context.vars;
  if (!v.queueToken || v.admission || v.outcome) return done();
  if ((Date.now() - v.joined) / 1000 > CFG.queueTimeout) {
    refused(v, events, 'QUEUE_TIMEOUT');
    return done();
  }
  return setTimeout(done, v.pollWait * 1000 * (1 + Math.random() * 0.2));
}

// As the site does (site/queue.js): with a known number, the runner's position between its
// own checks comes from the shared "now serving" (cached ~1 s at the edge: nginx locally,
// CloudFront on AWS); its own check (the origin) once its number is reached.
function inQueue(vars) {
  return Boolean(vars.queueToken) && !vars.admission && !vars.outcome && !vars.shared;
}

function useShared(vars) {
  return Boolean(vars.queueToken) && !vars.admission && !vars.outcome && Boolean(vars.shared);
}

function afterShared(req, res, context, events, done) {
  const v = context.vars;
  const body = base.parse(res);
  base.countAnswer('now_serving', res, body, events);
  if (res.statusCode === 200 && Number.isFinite(body.nowServing)) {
    const left = v.number - body.nowServing;
    if (!body.queueEnabled || !body.drawn || left <= 0) {
      v.shared = false; // its own check now: the admission
      v.pollWait = 0;
    } else {
      const secs = Math.ceil((left * 60) / body.admissionRatePerMinute);
      v.pollWait = body.paused ? 10 : Math.min(30, Math.max(1, secs / 4));
    }
  } else {
    v.shared = false;
    v.pollWait = base.retryAfter(res, 1);
  }
  return done();
}

function afterPoll(req, res, context, events, done) {
  const v = context.vars;
  const body = base.parse(res);
  base.countAnswer('poll', res, body, events);
  if (res.statusCode === 200 && body.state === 'ADMITTED' && body.admissionToken) {
    v.admission = body.admissionToken;
    v.number = body.number;
    v.admitted = Date.now();
    events.emit('counter', 'racecap.queue.admitted', 1);
  } else if (res.statusCode === 200 && ['WAITING', 'WAITING_FOR_DRAW', 'PAUSED'].includes(body.state)) {
    v.pollWait = base.retryAfter(res, body.retryAfterSeconds || 1);
    if (body.number) {
      v.number = body.number;
      v.shared = true;
    }
  } else if (res.statusCode === 200 && body.state === 'EXPIRED') {
    v.outcome = 'expired';
    events.emit('counter', 'racecap.queue.expired', 1);
  } else if (res.statusCode === 429 || res.statusCode >= 500) {
    v.pollWait = base.retryAfter(res, 1); // countAnswer counted a 5xx without Retry-After
  } else {
    refused(v, events, body.error || `POLL_${res.statusCode}_${body.state || ''}`);
  }
  return done();
}

function queued(context, next) {
  const v = context.vars;
  return next(Boolean(v.queueToken) && !v.admission && !v.outcome);
}

function needsPage(vars) {
  return Boolean(vars.admission) && !vars.eventId && !vars.outcome;
}

function afterQueueHold(req, res, context, events, done) {
  const v = context.vars;
  return base.afterHold(req, res, context, events, () => {
    if (v.holdId && v.registers === undefined) {
      v.registers = share(holders, CFG.registerPercent);
      holders += 1;
      if (v.registers) events.emit('counter', 'racecap.queue.registering', 1);
    }
    return done();
  });
}

function registering(context, events, done) {
  return context.vars.registers ? base.think(context, events, done) : done();
}

function mayRegister(vars) {
  return Boolean(vars.registers) && base.hasHold(vars);
}

function queueDone(context, events, done) {
  const v = context.vars;
  if (v.admission && !v.holdId) {
    const clear = v.outcome === 'unplaced' && (v.outcomeCode === 'SOLD_OUT' || v.outcomeCode === 'SOLD_OUT_PAGE');
    if (clear) events.emit('counter', 'racecap.queue.sold_out', 1);
    else if (v.outcome !== 'refused') refused(v, events, v.outcomeCode || 'NO_PLACE');
  }
  if (v.holdId && !v.registers && !v.outcome) v.outcome = 'held'; // on the form: the place stays held
  return base.finish(context, events, () => {
    base.record({
      e: 'queue',
      joined: v.joined || null,
      answered: v.answered || null,
      arrival: v.arrival === undefined ? null : v.arrival,
      number: v.number === undefined ? null : v.number,
      admitted: v.admitted || null,
      tab2: v.tab2 === undefined ? null : v.tab2,
      outcome: v.outcome || null,
      code: v.outcomeCode || null,
    });
    return done();
  });
}

module.exports = {
  newQueueRunner,
  waitAsTold,
  needsDevice,
  needsDeviceLoop,
  afterDevice,
  needsChallenge,
  afterChallenge,
  hasProof,
  afterJoin,
  joining,
  queueWait,
  inQueue,
  useShared,
  afterShared,
  afterPoll,
  queued,
  needsPage,
  pickEvent: base.pickEvent,
  hasEvent: base.hasEvent,
  backoffBeforeRetry: base.backoffBeforeRetry,
  retrying: base.retrying,
  afterQueueHold,
  registering,
  mayRegister,
  afterRegister: base.afterRegister,
  payAtProvider: base.payAtProvider,
  mustConfirm: base.mustConfirm,
  afterConfirm: base.afterConfirm,
  waitingScreen: base.waitingScreen,
  hasRegistration: base.hasRegistration,
  afterStatus: base.afterStatus,
  stillWaiting: base.stillWaiting,
  queueDone,
};
