// Artillery hooks for results-burst.yml: a runner reads the current version, pages,
// then types a name they saw (one request per keystroke from the second letter).
//
//   RACECAP_RACE_ID   the race (required)
//   RACECAP_EVENT_ID  the event whose results are published (required)
'use strict';

const CFG = { raceId: process.env.RACECAP_RACE_ID || '', eventId: process.env.RACECAP_EVENT_ID || '' };

function newReader(context, events, done) {
  context.vars.raceId = CFG.raceId;
  context.vars.eventId = CFG.eventId;
  context.vars.seen = [];
  return done();
}

function parse(res) {
  try {
    return JSON.parse(res.body);
  } catch {
    return null;
  }
}

function takeVersion(req, res, context, events, done) {
  const body = parse(res) || {};
  const ev = (body.events || []).find((e) => e.eventId === context.vars.eventId);
  if (!ev || !ev.published) return done(new Error('results are not published for RACECAP_EVENT_ID'));
  context.vars.version = ev.version;
  return done();
}

function rememberNames(req, res, context, events, done) {
  const body = parse(res) || {};
  for (const r of body.results || []) context.vars.seen.push(r);
  return done();
}

// The runner looks for someone: a name they saw (or a bib), typed letter by letter.
function startTyping(context, events, done) {
  const seen = context.vars.seen;
  const who = seen.length ? seen[Math.floor(Math.random() * seen.length)] : { name: 'an', bib: 1 };
  const parts = who.name.split(' ').filter((w) => w.length >= 2);
  const word = Math.random() < 0.2 && who.bib >= 10 ? String(who.bib)
    : parts.length ? parts[Math.floor(Math.random() * parts.length)] : who.name;
  const keys = [];
  for (let n = 2; n <= Math.min(word.length, 8); n++) keys.push(encodeURIComponent(word.slice(0, n)));
  context.vars.keystrokes = keys; // the box asks nothing before the second letter
  context.vars.bib = who.bib;
  return done();
}

function takeSuggestion(req, res, context, events, done) {
  const body = parse(res) || {};
  if ((body.suggestions || []).length) context.vars.bib = body.suggestions[0].bib;
  return done();
}

// 120-250 ms between keystrokes: a typist's pace.
function keystrokePause(context, events, done) {
  setTimeout(done, 120 + Math.random() * 130);
}

module.exports = { newReader, takeVersion, rememberNames, startTyping, takeSuggestion, keystrokePause };
