// The race director's console: a separate bundle from the runner site (site/build.py bundles
// this file with esbuild into admin/console.<hash>.js). Its settings come from config.json
// beside it (the user pool, its app client and Cognito's endpoint), written by the
// deployment on AWS and by the local stack's gateway locally.
import { adminApi } from './api.js';
import { h, show } from './dom.js';
import { newRacePage, racePage, racesPage, subnav } from './races.js';
import { livePage } from './live.js';
import { resultsPage } from './results.js';
import { auditPage, runnersPage } from './runners.js';
import { codesPage } from './codes.js';
import { questionsPage } from './questions.js';
import { waitlistPage } from './waitlist.js';
import { ballotPage } from './ballot.js';
import { createSession } from './session.js';
import { signInFlow } from './signin.js';

async function boot() {
  const config = await (await fetch('config.json', { credentials: 'omit', cache: 'no-store' })).json();
  const nav = document.getElementById('nav');
  const who = document.getElementById('who');
  const session = createSession(config, {
    onChange: () => {
      nav.hidden = who.hidden = !session.signedIn;
      document.getElementById('who-email').textContent = session.director?.email || '';
    },
  });
  const flow = signInFlow(session, () => route());
  const rootApi = adminApi(session, { onSignedOut: () => flow.start('Your session has ended. Please sign in again.') });

  document.getElementById('sign-out').addEventListener('click', async () => {
    try {
      await session.signOut();
    } finally {
      flow.start('You are signed out.');
    }
  });

  async function route() {
    if (!session.signedIn) return flow.start();
    const api = rootApi.forRoute(); // this page's reads, cancelled when the next route starts
    const path = location.hash.replace(/^#/, '') || '/races';
    for (const a of nav.querySelectorAll('a')) {
      if (path.startsWith(a.hash.slice(1))) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    try {
      if (path === '/races') return await racesPage(api);
      if (path === '/races/new') return newRacePage(api);
      const race = /^\/races\/([^/?]+)(?:\/(runners|audit|results|live|questions|codes|waitlist|ballot))?(?:\?.*)?$/.exec(path);
      if (race?.[2] === 'runners') return await runnersPage(api, decodeURIComponent(race[1]), subnav);
      if (race?.[2] === 'live') return await livePage(api, decodeURIComponent(race[1]), subnav);
      if (race?.[2] === 'results') return await resultsPage(api, decodeURIComponent(race[1]), subnav);
      if (race?.[2] === 'questions') return await questionsPage(api, decodeURIComponent(race[1]), subnav);
      if (race?.[2] === 'codes') return await codesPage(api, decodeURIComponent(race[1]), subnav);
      if (race?.[2] === 'waitlist') return await waitlistPage(api, decodeURIComponent(race[1]), subnav);
      if (race?.[2] === 'ballot') return await ballotPage(api, decodeURIComponent(race[1]), subnav);
      if (race?.[2] === 'audit') return await auditPage(api, decodeURIComponent(race[1]), subnav);
      if (race) return await racePage(api, decodeURIComponent(race[1]));
      show(h('h1', {}, 'Not found'), h('p', {}, h('a', { href: '#/races' }, 'Back to your races')));
    } catch (err) {
      if (err.status === 401 || err.name === 'AbortError') return; // signed out, or moved on meanwhile
      if (err.status === 404) {
        return show(h('h1', {}, 'Not found'), h('p', { 'data-testid': 'not-found' }, 'There is no such race among yours.'), h('p', {}, h('a', { href: '#/races' }, 'Back to your races')));
      }
      show(h('h1', {}, 'Something went wrong'), h('p', { class: 'alert', role: 'alert' }, err.message));
    }
  }

  window.addEventListener('hashchange', route);
  await session.resume();
  await route();
}

boot().catch((err) => {
  show(h('h1', {}, 'The console cannot start'), h('p', { class: 'alert', role: 'alert' }, String(err.message || err)));
});
