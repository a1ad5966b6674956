// Results: per event, upload a CSV straight to S3 with the presigned URL the API hands out
// (a progress bar while it goes), follow its processing (the row errors when it is rejected),
// then publish or unpublish the event's newest valid version.
import { announce, h, show } from './dom.js';

const enc = encodeURIComponent;
const STATUS = {
  WAITING_FOR_FILE: 'Waiting for the file',
  PROCESSING: 'Being checked',
  READY: 'Ready',
  REJECTED: 'Rejected',
};

// XMLHttpRequest, not fetch: only it reports upload progress. No credentials: the URL's
// signature is the authorisation (the bucket's CORS admits this origin only).
function put(url, headers, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', url);
    for (const [k, v] of Object.entries(headers || {})) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded, e.total);
    xhr.onload = () => (xhr.status >= 200 && xhr.status < 300 ? resolve() : reject(new Error(`The upload was refused (${xhr.status}).`)));
    xhr.onerror = () => reject(new Error('The upload failed: check the connection and try again.'));
    xhr.send(file);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function eventPanel(api, raceId, event) {
  const base = `/races/${enc(raceId)}/events/${enc(event.eventId)}/results`;
  const id = `file-${event.eventId}`;
  const file = h('input', { id, type: 'file', accept: '.csv,text/csv', 'data-testid': 'results-file' });
  const progress = h('progress', { max: 100, value: 0, hidden: true, 'aria-label': `Upload of ${event.name}`, 'data-testid': 'upload-progress' });
  const state = h('p', { role: 'status', 'data-testid': 'results-state' });
  const upload = h('p', { 'data-testid': 'upload-status' });
  const errors = h('ol', { class: 'errors', 'data-testid': 'row-errors', hidden: true });
  const publish = h('button', { type: 'button', 'data-testid': 'results-publish' }, 'Publish');
  const unpublish = h('button', { type: 'button', 'data-testid': 'results-unpublish' }, 'Unpublish');
  const go = h('button', { type: 'submit', 'data-testid': 'results-upload' }, 'Upload');

  function render(view) {
    state.textContent = view.version
      ? `Version ${view.version}, ${view.rows} runners · ${view.published ? 'published' : 'not published'}`
      : 'No results yet.';
    publish.disabled = !view.version || view.published;
    unpublish.disabled = !view.published;
  }

  function renderUpload(u) {
    upload.textContent = `Latest file: ${STATUS[u.status] || u.status}${u.rows ? ` (${u.rows} runners, version ${u.version})` : ''}${u.message ? `. ${u.message}` : ''}`;
    errors.replaceChildren(...(u.errors || []).map((e) => h('li', {}, `Line ${e.line}: ${e.reason}`)));
    errors.hidden = !u.errors?.length;
  }

  async function refresh() {
    const view = await api.get(base);
    render(view);
    if (view.uploads?.[0]) renderUpload(view.uploads[0]);
  }

  // An event with team entries: how many members' times make a team's total (the upload's teamScoring).
  const kId = `team-scoring-${event.eventId}`;
  const scoring = event.teamMaxSize ? h('input', {
    id: kId, type: 'number', min: 1, max: event.teamMaxSize, value: Math.min(3, event.teamMaxSize),
    inputMode: 'numeric', 'data-testid': 'team-scoring',
  }) : null;
  const form = h('form', { class: 'upload', 'data-testid': 'results-form' },
    h('label', { htmlFor: id }, 'Results file (CSV)'),
    h('p', { class: 'hint' }, 'bib,chip_time,gun_time,status,category and split_<name> columns.'),
    file,
    scoring && h('div', { class: 'field' }, h('label', { htmlFor: kId }, 'Team standings: best times that count per team'), scoring),
    go, progress);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const chosen = file.files[0];
    if (!chosen) {
      upload.textContent = 'Choose a CSV file first.';
      return;
    }
    go.disabled = true;
    try {
      const ticket = await api.post(`${base}/uploads`, scoring ? { teamScoring: Number(scoring.value) } : {});
      progress.hidden = false;
      progress.value = 0;
      await put(ticket.uploadUrl, ticket.uploadHeaders, chosen, (done, total) => {
        progress.value = Math.round((100 * done) / total);
      });
      progress.value = 100;
      announce('Uploaded; the file is being checked.');
      let u = { status: 'WAITING_FOR_FILE' };
      for (let i = 0; i < 120 && (u.status === 'WAITING_FOR_FILE' || u.status === 'PROCESSING'); i++) {
        u = await api.get(`${base}/uploads/${enc(ticket.uploadId)}`);
        renderUpload(u);
        if (u.status === 'WAITING_FOR_FILE' || u.status === 'PROCESSING') await sleep(1000);
      }
      announce(u.status === 'READY' ? 'The results are ready to publish.' : 'The file was rejected; see the errors.');
      await refresh();
    } catch (err) {
      upload.textContent = err.message;
    } finally {
      go.disabled = false;
    }
  });

  for (const [button, action] of [[publish, 'publish'], [unpublish, 'unpublish']]) {
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        render(await api.post(`${base}/${action}`, {}));
        announce(action === 'publish' ? `${event.name}: results published.` : `${event.name}: results unpublished.`);
      } catch (err) {
        upload.textContent = err.message;
        button.disabled = false;
      }
    });
  }

  const panel = h('section', { class: 'panel results', 'aria-labelledby': `h-${event.eventId}`, 'data-testid': 'results-event', dataset: { eventId: event.eventId } },
    h('h2', { id: `h-${event.eventId}` }, event.name), state, form, upload, errors, h('div', { class: 'row' }, publish, unpublish));
  return { panel, refresh };
}

export async function resultsPage(api, raceId, subnav) {
  const race = await api.get(`/races/${enc(raceId)}`);
  const panels = race.events.map((e) => eventPanel(api, raceId, e));
  show(
    h('p', {}, h('a', { href: '#/races' }, '← Your races')),
    h('h1', {}, `Results · ${race.name}`),
    subnav(raceId, 'results'),
    ...panels.map((p) => p.panel),
  );
  await Promise.all(panels.map((p) => p.refresh()));
}
