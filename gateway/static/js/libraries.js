// Libraries: their sizes; one library's documents (delete), uploads by drag and drop or the file
// input with per-file progress from the ingest stream, URL ingest, database attach (admins), and
// the knowledge graph's communities.

import {ApiError, events, getJson, postJson, remove} from './api.js';
import {$, append, clear, el, when} from './dom.js';

let current = '';
let isAdmin = false;
let graph = null;

export function setAdmin(admin) {
  isAdmin = admin;
  $('#admin-databases').hidden = !admin;
}

export function setupLibraries() {
  $('#library-pick').addEventListener('submit', (event) => {
    event.preventDefault();
    const name = $('#library-name').value.trim() || 'default';
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name)) {
      note('A library name has letters, digits, ".", "_" and "-" only.');
      return;
    }
    location.hash = `#/libraries/${encodeURIComponent(name)}`;
  });
  const zone = $('#dropzone');
  for (const kind of ['dragenter', 'dragover']) {
    zone.addEventListener(kind, (event) => {
      event.preventDefault();
      zone.classList.add('over');
    });
  }
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (event) => {
    event.preventDefault();
    zone.classList.remove('over');
    const files = [...(event.dataTransfer ? event.dataTransfer.files : [])];
    if (files.length) upload(files, []);
  });
  $('#upload-input').addEventListener('change', (event) => {
    const files = [...event.target.files];
    event.target.value = '';
    if (files.length) upload(files, []);
  });
  $('#url-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const value = $('#url-input').value.trim();
    if (!/^https?:\/\//i.test(value)) {
      note('Give a web page address starting with http:// or https://.');
      return;
    }
    $('#url-input').value = '';
    upload([], [value]);
  });
  $('#db-form').addEventListener('submit', (event) => {
    event.preventDefault();
    attach();
  });
  $('#graph-load').addEventListener('click', () => loadGraph());
  $('#graph-filter').addEventListener('input', () => drawGraph());
}

function note(text) {
  $('#notice').textContent = text;
}

export async function showLibraries(name) {
  await listLibraries();
  const detail = $('#library-detail');
  if (!name) {
    detail.hidden = true;
    current = '';
    return;
  }
  if (name !== current) {
    clear($('#uploads'));
    clear($('#graph-communities'));
    $('#graph-summary').textContent = '';
    $('#db-result').textContent = '';
    graph = null;
  }
  current = name;
  detail.hidden = false;
  $('#library-title').textContent = `Library ${name}`;
  $('#library-name').value = name;
  await Promise.all([listDocuments(), isAdmin ? listDatabases() : null]);
}

async function listLibraries() {
  let libraries = [];
  let failed = null;
  try {
    libraries = (await getJson('/v1/libraries')).libraries;
  } catch (error) {
    failed = error;
  }
  const body = clear($('#libraries-table tbody')); // emptied once the new rows are known
  if (failed) {
    append(body, el('tr', {}, el('td', {colspan: 6, class: 'error'}, failed.message)));
    return;
  }
  if (!libraries.length) append(body, el('tr', {}, el('td', {colspan: 6}, 'No library yet: open "default" and add documents.')));
  for (const lib of libraries) {
    append(body, el('tr', {'data-testid': 'library-row', 'data-library': lib.name},
      el('th', {scope: 'row'}, lib.name),
      el('td', {}, String(lib.documents)),
      el('td', {}, String(lib.chunks)),
      el('td', {}, String(lib.databases)),
      el('td', {}, when(lib.updated_at)),
      el('td', {}, el('a', {href: `#/libraries/${encodeURIComponent(lib.name)}`, 'aria-label': `Open library ${lib.name}`}, 'Open'))));
  }
}

const TYPES = {
  'application/pdf': 'PDF',
  'text/markdown': 'Markdown',
  'text/plain': 'Text',
  'text/html': 'HTML',
  'text/csv': 'CSV',
};

async function listDocuments() {
  let documents = [];
  let failed = null;
  try {
    documents = (await getJson('/v1/documents', {library: current})).documents;
  } catch (error) {
    failed = error;
  }
  const body = clear($('#documents-table tbody'));
  if (failed) {
    append(body, el('tr', {}, el('td', {colspan: 6, class: 'error'}, failed.message)));
    return;
  }
  if (!documents.length) append(body, el('tr', {}, el('td', {colspan: 6}, 'No documents yet.')));
  for (const doc of documents) {
    const del = el('button', {type: 'button', class: 'quiet danger', 'aria-label': `Delete ${doc.title || doc.source}`}, 'Delete');
    del.addEventListener('click', () => deleteDocument(doc, del));
    append(body, el('tr', {'data-testid': 'document-row', 'data-source': doc.source},
      el('td', {}, doc.title || ''),
      el('td', {}, el('code', {}, doc.source)),
      el('td', {}, TYPES[doc.media_type] || doc.media_type),
      el('td', {}, String(doc.chunk_count)),
      el('td', {}, when(doc.indexed_at)),
      el('td', {}, del)));
  }
}

async function deleteDocument(doc, button) {
  if (button.dataset.armed !== 'yes') {
    button.dataset.armed = 'yes';
    button.textContent = 'Confirm delete';
    return;
  }
  button.disabled = true;
  try {
    const done = await remove(`/v1/documents/${encodeURIComponent(doc.document_id)}`, {library: current});
    note(`Deleted ${doc.source} (${done.chunks_removed} chunks).`);
  } catch (error) {
    note(`Could not delete ${doc.source}: ${error.status === 403 ? 'your key may not delete documents. ' : ''}${error.message}`);
  }
  await listDocuments();
  await listLibraries();
}

const STAGES = {
  FILE_STAGE_PARSED: ['parsed', 1],
  FILE_STAGE_CHUNKED: ['chunked', 2],
  FILE_STAGE_EMBEDDED: ['embedded', 3],
  FILE_STAGE_INDEXED: ['indexed', 4],
  FILE_STAGE_UNCHANGED: ['unchanged', 4],
  FILE_STAGE_FAILED: ['failed', 4],
  FILE_STAGE_REMOVED: ['removed', 4],
};

function progressRow(name) {
  const bar = el('progress', {max: 4, value: 0, 'aria-label': `Progress of ${name}`});
  const state = el('span', {class: 'stage', 'data-testid': 'upload-stage'}, 'waiting');
  const row = el('li', {'data-testid': 'upload', 'data-name': name}, el('span', {class: 'file'}, name), ' ', bar, ' ', state);
  $('#uploads').append(row);
  return {row, bar, state};
}

/** Files and URLs to POST /v1/ingest, each file's stages shown as the stream reports them. */
async function upload(files, urls) {
  const library = current || 'default';
  const form = new FormData();
  form.append('library', library);
  const rows = new Map();
  for (const file of files) {
    form.append('files', file, file.name);
    rows.set(`upload://${library}/${file.name}`, progressRow(file.name));
  }
  for (const address of urls) {
    form.append('urls', address);
    rows.set(address, progressRow(address));
  }
  const ordered = [...rows.values()];
  try {
    for await (const {event, data} of events('POST', '/v1/ingest', {form})) {
      if (event === 'file') {
        const row = rows.get(data.source) || ordered[(data.index || 0) - 1] || rowFor(rows, data.source);
        const [label, step] = STAGES[data.stage] || [String(data.stage).toLowerCase(), 0];
        row.bar.value = step;
        row.state.textContent = label + (data.chunk_count ? ` (${data.chunk_count} chunks)` : '') + (data.reason ? `: ${data.reason}` : '');
        row.row.dataset.stage = label;
      } else if (event === 'summary') {
        // The run's notes too: enrichment skipped, documents indexed again for a new build.
        const notes = (data.notes || []).map((n) => ` ${n}.`).join('');
        note(`Ingest done: ${data.indexed || 0} indexed, ${data.unchanged || 0} unchanged, ${data.failed || 0} failed.${notes}`);
      } else if (event === 'error') {
        note(`Ingest failed: ${data.message}`);
      }
    }
  } catch (error) {
    const why = error instanceof ApiError && error.status === 403 ? 'your key may not add documents here. ' : '';
    note(`Ingest failed: ${why}${error.message}`);
    for (const row of rows.values()) {
      if (!row.row.dataset.stage) row.state.textContent = 'not sent';
    }
  }
  await listDocuments();
  await listLibraries();
}

function rowFor(rows, source) {
  const row = progressRow(source);
  rows.set(source, row);
  return row;
}

async function listDatabases() {
  const list = clear($('#db-list'));
  try {
    const found = (await getJson('/v1/databases', {library: current})).databases;
    for (const db of found) {
      append(list, el('li', {}, el('strong', {}, db.name), ` (${db.dialect}, ${db.tables.length} tables) `, el('code', {}, db.url),
        db.error ? el('span', {class: 'error'}, ` ${db.error}`) : null));
    }
  } catch (error) {
    append(list, el('li', {class: 'error'}, error.message));
  }
}

async function attach() {
  const result = $('#db-result');
  const body = {name: $('#db-name').value.trim(), url: $('#db-url').value.trim(), library: current};
  if (!body.name || !body.url) {
    result.textContent = 'Give the database a name and a URL.';
    return;
  }
  try {
    const db = await postJson('/v1/databases', body);
    result.textContent = `Attached ${db.name} (${db.dialect}, ${db.tables.length} tables).`;
    await listDatabases();
  } catch (error) {
    result.textContent = error.status === 403
      ? `Only admins may attach databases: ${error.message}`
      : `Could not attach: ${error.message}`;
  }
}

async function loadGraph() {
  $('#graph-summary').textContent = 'Loading the graph…';
  try {
    graph = await getJson('/v1/graph', {library: current});
  } catch (error) {
    $('#graph-summary').textContent = `Could not load the graph: ${error.message}`;
    return;
  }
  drawGraph();
}

function drawGraph() {
  if (!graph) return;
  const names = new Map(graph.entities.map((e) => [e.key, e.name]));
  const filter = $('#graph-filter').value.trim().toLowerCase();
  const shown = graph.communities.filter((c) => !filter
    || c.summary.toLowerCase().includes(filter)
    || c.members.some((m) => (names.get(m) || m).toLowerCase().includes(filter)));
  $('#graph-summary').textContent = `${graph.entities.length} entities, ${graph.relations.length} relations, `
    + `${graph.communities.length} communities${filter ? `, ${shown.length} matching` : ''}.`;
  const list = clear($('#graph-communities'));
  for (const c of shown.slice(0, 200)) {
    const members = c.members.map((m) => names.get(m) || m);
    append(list, el('li', {'data-testid': 'community'},
      el('details', {},
        el('summary', {}, `${members.slice(0, 4).join(', ')}${members.length > 4 ? ` and ${members.length - 4} more` : ''}`),
        el('p', {}, c.summary),
        el('p', {class: 'muted'}, `Members: ${members.join(', ')}`),
        el('p', {class: 'muted'}, `${c.chunk_ids.length} chunk(s) in ${c.document_ids.length} document(s)`))));
  }
}
