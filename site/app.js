// Racecap runner site: a hash-routed single page (S3/CloudFront need no rewrites).
//   #/                     race list                          races.js
//   #/races/{raceId}       events, places left, hold a place   races.js
//   #/holds/{holdId}       runner details, then payment        hold.js
//   #/registrations/{id}   waiting screen, then confirmation   wait.js
//   #/races/{r}/events/{e}/results[/{bib}]  results, search, a runner's result  results.js
//   #/races/{raceId}/queue  the opening's waiting room        queue.js
//   #/my[/{token}]         my registration (the emailed link)  mine.js
//   #/my/email/{token}     confirm a new email address          mine.js
//   #/races/{raceId}/find  find my registration: email me the link  mine.js
//   #/waitlist/join/{r}/{e}  join a sold-out event's waitlist      waitlist.js
//   #/waitlist[/{token}]   confirm (the emailed link), my place, leave  waitlist.js
//   #/waitlist/offer[/{token}]  a place offered from the waitlist: claim it or pass it on  waitlist.js
//   #/ballot/apply/{r}/{e}, #/ballot[/{token}], #/ballot/draw/{r}/{e}  apply, my application, the draw  ballot.js
//   #/transfer/{token}     a place handed to me: take it over (the emailed link)  mine.js → transfer.js
// Each route's module loads on demand, so a page only carries its own code.
// Add ?fastpoll=1 to the page URL to divide the waiting screen's waits by 10.
import { errorBox, h, page } from './ui.js';

// A module's loader written once however many routes it serves: the hold page's weight, which
// counts this file, is at its budget.
const races = () => import('./races.js');
const mine = () => import('./mine.js');
const results = () => import('./results.js');
const ROUTES = [
  [/^\/$/, races, 'raceList'],
  [/^\/races\/([^/]+)$/, races, 'racePage'],
  [/^\/races\/([^/]+)\/queue$/, () => import('./queue.js'), 'queuePage'],
  [/^\/races\/([^/]+)\/find$/, mine, 'findPage'],
  // "my registration" and a place handed over, one pattern for them all (mine.js sorts them): the
  // hold page's budget has no room for a line per route.
  [/^\/(my|transfer)(?=\/|$)\/?(.*)$/, mine, 'minePage'],
  [/^\/waitlist(?=\/|$)\/?(.*)$/, () => import('./waitlist.js'), 'waitlistPage'],
  [/^\/ballot(?=\/|$)\/?(.*)$/, () => import('./ballot.js'), 'ballotPage'],
  [/^\/holds\/([^/]+)$/, () => import('./hold.js'), 'holdPage'],
  [/^\/registrations\/([^/]+)$/, () => import('./wait.js'), 'registrationPage'],
  [/^\/races\/([^/]+)\/events\/([^/]+)\/results$/, results, 'resultsPage'],
  [/^\/races\/([^/]+)\/events\/([^/]+)\/results\/(\d+)$/, results, 'runnerPage'],
];
let rendered = false;
let seq = 0;

async function render() {
  const hash = location.hash;
  const isRoute = hash.startsWith('#/');
  if (!isRoute && hash && rendered) return false; // an in-page anchor, not a route
  rendered = true;
  const path = (isRoute && hash.slice(1).split('?')[0]) || '/';
  const n = ++seq;
  for (const [re, load, name] of ROUTES) {
    const m = re.exec(path);
    if (!m) continue;
    let args;
    try {
      args = m.slice(1).map(decodeURIComponent);
    } catch {
      break;
    }
    let mod;
    try {
      mod = await load();
    } catch {
      if (n === seq) {
        page('Could not load this page').body.append(
          errorBox('Part of this page did not download. Check your connection.', () => location.reload()));
      }
      return true;
    }
    if (n === seq) mod[name](...args); // a newer navigation wins
    return true;
  }
  page('Page not found').body.append(h('p', { testid: 'not-found' }, 'There is nothing at this address. ',
    h('a', { href: '#/' }, 'See all races')));
  return true;
}

window.addEventListener('hashchange', async () => {
  if (!(await render())) return;
  window.scrollTo(0, 0);
  const h1 = document.querySelector('#view h1');
  if (h1) h1.focus({ preventScroll: true });
});
render();
