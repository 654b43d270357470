// The evidence panel: a cited chunk with its heading path and pages; for a PDF, the page as a
// picture with the chunk's region drawn over it; for other formats, the passage highlighted in
// its section (its neighbours with the same heading path).

import {ApiError, blobUrl, getJson} from './api.js';
import {$, append, clear, el, pagesText} from './dom.js';

const dialog = () => $('#evidence');
const body = () => $('#evidence-body');
let blobs = [];

export function setupEvidence() {
  $('#evidence-close').addEventListener('click', () => dialog().close());
  dialog().addEventListener('close', () => {
    for (const blob of blobs) URL.revokeObjectURL(blob);
    blobs = [];
    clear(body());
  });
}

function show(title, opener) {
  $('#evidence-title').textContent = title;
  clear(body());
  if (!dialog().open) dialog().showModal();
  if (opener) dialog().addEventListener('close', () => opener.focus(), {once: true});
}

function problem(text) {
  return el('p', {class: 'error', role: 'alert'}, text);
}

/** A citation of an answer: a chunk, or a database result (its statement and rows). */
export async function openCitation(citation, library, opener) {
  if (citation.sql && citation.sql.database) {
    show(`Source ${citation.ref}: database ${citation.sql.database}`, opener);
    append(body(),
      el('p', {}, `${citation.sql.row_count} row(s)${citation.sql.truncated ? ', truncated' : ''} from `,
        el('code', {}, citation.sql.database)),
      el('pre', {class: 'code'}, citation.sql.query),
      el('pre', {class: 'passage'}, citation.quote || ''));
    return;
  }
  await openChunk(citation.chunk_id, library, opener, `Source ${citation.ref}`);
}

export async function openChunk(chunkId, library, opener, label = 'Chunk') {
  show(label, opener);
  const status = el('p', {class: 'muted', role: 'status'}, 'Loading the passage…');
  append(body(), status);
  let chunk;
  try {
    chunk = await getJson(`/v1/chunks/${encodeURIComponent(chunkId)}`, {library});
  } catch (error) {
    status.replaceWith(problem(`Could not load ${chunkId}: ${error.message}`));
    return;
  }
  status.remove();
  $('#evidence-title').textContent = `${label}: ${chunk.title || chunk.document_id}`;
  append(body(), describe(chunk));
  const regions = Array.isArray(chunk.regions) ? chunk.regions : [];
  if (regions.length || (chunk.media_type === 'application/pdf' && chunk.pages && chunk.pages.length)) {
    await showPages(chunk, regions, library);
  } else {
    await showSection(chunk, library);
  }
}

function describe(chunk) {
  const path = chunk.heading_path && chunk.heading_path.length ? chunk.heading_path.join(' › ') : '(before the first heading)';
  return el('dl', {class: 'facts'},
    el('dt', {}, 'Document'), el('dd', {}, chunk.title || chunk.document_id),
    el('dt', {}, 'Source'), el('dd', {}, el('code', {}, chunk.source || '')),
    el('dt', {}, 'Section'), el('dd', {'data-testid': 'heading-path'}, path),
    chunk.pages && chunk.pages.length ? [el('dt', {}, 'Pages'), el('dd', {}, pagesText(chunk.pages))] : null,
    el('dt', {}, 'Chunk'), el('dd', {}, el('code', {}, chunk.chunk_id)));
}

/** The page pictures (fetched with the key header, shown from blob: URLs) with the regions drawn. */
async function showPages(chunk, regions, library) {
  const pages = [...new Set([...regions.map((r) => r.page), ...(chunk.pages || [])])].sort((a, b) => a - b);
  const holder = el('div', {class: 'pages'});
  const picker = pages.length > 1
    ? el('div', {class: 'page-picker', role: 'group', 'aria-label': 'Page'},
      pages.map((page) => el('button', {type: 'button', class: 'quiet', 'data-page': page,
        on: {click: () => drawPage(holder, chunk, regions, library, page, picker)}}, `Page ${page}`)))
    : null;
  append(body(), picker, el('div', {class: 'side-by-side'}, holder,
    el('div', {}, el('h3', {}, 'Passage'), el('p', {class: 'passage'}, chunk.text))));
  const ok = await drawPage(holder, chunk, regions, library, pages[0], picker);
  if (!ok) await showSection(chunk, library);
}

async function drawPage(holder, chunk, regions, library, page, picker) {
  if (picker) {
    for (const button of picker.querySelectorAll('button')) {
      button.setAttribute('aria-pressed', String(Number(button.dataset.page) === page));
    }
  }
  clear(holder);
  const status = el('p', {class: 'muted', role: 'status'}, `Rendering page ${page}…`);
  holder.append(status);
  let src;
  try {
    src = await blobUrl(`/v1/chunks/${encodeURIComponent(chunk.chunk_id)}/visual`, {library, page});
  } catch (error) {
    const why = error instanceof ApiError && error.status === 412
      ? 'This document has no page pictures'
      : 'The page picture could not be loaded';
    status.replaceWith(problem(`${why}: ${error.message}`));
    return false;
  }
  blobs.push(src);
  const image = el('img', {'data-testid': 'page-image', alt: `Page ${page} of ${chunk.title || chunk.document_id}, the cited passage outlined`});
  const frame = el('div', {class: 'page', 'data-testid': 'page'}, image);
  for (const region of regions.filter((r) => r.page === page)) {
    const box = el('div', {class: 'region', 'data-testid': 'region', 'aria-hidden': 'true'});
    // CSSOM, not a style attribute: allowed under style-src 'self'.
    box.style.left = `${clamp(region.left) * 100}%`;
    box.style.top = `${clamp(region.top) * 100}%`;
    box.style.width = `${Math.max(0, clamp(region.right) - clamp(region.left)) * 100}%`;
    box.style.height = `${Math.max(0, clamp(region.bottom) - clamp(region.top)) * 100}%`;
    frame.append(box);
  }
  const loaded = new Promise((resolve) => {
    image.addEventListener('load', () => resolve(true), {once: true});
    image.addEventListener('error', () => resolve(false), {once: true});
  });
  image.src = src;
  status.replaceWith(el('figure', {}, frame, el('figcaption', {}, `Page ${page}`)));
  if (!(await loaded)) {
    frame.replaceWith(problem('The page picture could not be shown.'));
    return false;
  }
  return true;
}

function clamp(value) {
  return Math.min(1, Math.max(0, Number(value) || 0));
}

/** The cited chunk highlighted among its neighbours of the same section. */
async function showSection(chunk, library) {
  const same = (other) => JSON.stringify(other.heading_path || []) === JSON.stringify(chunk.heading_path || []);
  const around = await Promise.all([chunk.position - 1, chunk.position + 1].map(async (position) => {
    if (position < 0) return null;
    try {
      const other = await getJson(`/v1/chunks/${encodeURIComponent(`${chunk.document_id}:${position}`)}`, {library});
      return other && same(other) ? other : null;
    } catch {
      return null; // the document's first or last chunk
    }
  }));
  const section = el('div', {class: 'section', 'data-testid': 'section'},
    chunk.heading_path && chunk.heading_path.length ? el('p', {class: 'section-head'}, chunk.heading_path.join(' › ')) : null,
    around[0] ? el('p', {class: 'passage'}, around[0].text) : null,
    el('p', {class: 'passage'}, el('mark', {'data-testid': 'cited-passage'}, chunk.text)),
    around[1] ? el('p', {class: 'passage'}, around[1].text) : null);
  append(body(), el('h3', {}, 'In its section'), section);
}
