// Ask: a question streamed to an answer. The route and each tool call show as they arrive, the
// answer grows from its deltas, then citations (numbered chips), the verification manifest, a
// warning when the evidence was weak, feedback, and the trace link.

import {ApiError, events, getJson, postJson} from './api.js';
import {$, append, clear, el, pagesText, percent} from './dom.js';
import {openCitation} from './evidence.js';

let sessionId = '';

function newSessionId() {
  const bytes = crypto.getRandomValues(new Uint8Array(12)); // randomUUID needs a secure context
  return 'ui-' + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function newConversation() {
  sessionId = newSessionId();
  $('#ask-session').textContent = sessionId;
  clear($('#conversation'));
}

export function setupAsk() {
  newConversation();
  $('#ask-new').addEventListener('click', () => {
    newConversation();
    $('#ask-question').focus();
  });
  $('#ask-form').addEventListener('submit', (event) => {
    event.preventDefault();
    ask();
  });
  $('#ask-question').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault();
      ask();
    }
  });
}

/** The library selector from GET /v1/libraries (keeps the current choice). */
export async function loadLibraries() {
  const select = $('#ask-library');
  const current = select.value;
  let names = [];
  try {
    names = (await getJson('/v1/libraries')).libraries.map((l) => l.name);
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 401) names = [];
  }
  if (!names.includes('default')) names.unshift('default');
  clear(select);
  for (const name of names) append(select, el('option', {value: name}, name));
  select.value = names.includes(current) ? current : 'default';
}

async function ask() {
  const input = $('#ask-question');
  const question = input.value.trim();
  if (!question) {
    input.focus();
    return;
  }
  const submit = $('#ask-submit');
  submit.disabled = true;
  const turn = new Turn(question, $('#ask-library').value, $('#ask-mode').value, $('#ask-shape').value);
  $('#conversation').append(turn.node);
  input.value = '';
  try {
    await turn.run(sessionId);
  } finally {
    submit.disabled = false;
    input.focus();
  }
}

const VERDICTS = {
  VERDICT_SUPPORTED: 'supported',
  VERDICT_PARTIAL: 'partial',
  VERDICT_UNSUPPORTED: 'unsupported',
  VERDICT_UNSPECIFIED: 'unsupported',
};

function modeName(mode) {
  return String(mode || '').replace(/^SEARCH_MODE_/, '').toLowerCase().replace('_', '-');
}

/** One question and its answer, as it streams. */
class Turn {
  constructor(question, library, mode, shape) {
    this.question = question;
    this.library = library;
    this.mode = mode;
    this.shape = shape;
    this.grades = [];
    this.steps = el('ol', {class: 'steps', 'aria-label': 'Agent steps', 'data-testid': 'steps'});
    this.answer = el('div', {class: 'answer', 'aria-live': 'polite', 'aria-busy': 'true', 'data-testid': 'answer'});
    this.after = el('div', {class: 'after'});
    this.node = el('li', {class: 'turn', 'data-testid': 'turn'},
      el('h2', {class: 'question'}, question),
      el('p', {class: 'muted'}, `Library ${library} · mode ${mode} · answer ${shape}`),
      this.steps, this.answer, this.after);
    this.text = document.createTextNode('');
    this.answer.append(this.text);
  }

  async run(session) {
    const body = {question: this.question, library: this.library, mode: this.mode, query_mode: this.shape,
      session_id: session};
    try {
      for await (const {event, data} of events('POST', '/v1/query', {json: body})) {
        const handler = this[`on_${event}`];
        if (handler) handler.call(this, data);
      }
    } catch (error) {
      this.fail(error.message);
    } finally {
      this.answer.setAttribute('aria-busy', 'false');
    }
  }

  fail(message) {
    this.after.append(el('p', {class: 'error', role: 'alert'}, `The question failed: ${message}`));
  }

  step(...content) {
    const item = el('li', {}, ...content);
    this.steps.append(item);
    return item;
  }

  on_start(data) {
    this.traceId = data.trace_id;
  }

  on_route(data) {
    const shape = String(data.query_mode || '').replace(/^QUERY_MODE_/, '').toLowerCase();
    const parts = [`Route: ${modeName(data.mode)}`, shape ? `, ${shape} answer` : '', ` (${data.classifier})`,
      data.reason ? ` — ${data.reason}` : ''];
    const item = this.step(el('span', {'data-testid': 'route'}, ...parts));
    if (data.standalone_question) append(item, el('br'), `Read as: ${data.standalone_question}`);
    if (data.sub_questions && data.sub_questions.length) append(item, el('br'), `Sub-questions: ${data.sub_questions.join(' | ')}`);
  }

  on_tool_call(data) {
    let args = data.arguments_json || '';
    try {
      args = JSON.stringify(JSON.parse(args));
    } catch {
      // shown as sent
    }
    this.step(el('span', {'data-testid': 'tool-call'}, `Tool ${data.tool}`),
      ' ', el('code', {}, args), ` → ${data.result_count} result(s), ${Math.round(data.took_ms || 0)} ms`);
  }

  on_evidence(data) {
    this.grades.push(data);
    this.step(`Evidence: ${(data.hits || []).length} passage(s), graded ${data.grade} (${percent(data.score)})`);
  }

  on_delta(data) {
    this.text.appendData(data.text || '');
  }

  on_verification(data) {
    this.manifest = data.manifest;
  }

  on_error(data) {
    this.fail(`${data.code ? data.code + ': ' : ''}${data.message || ''}`);
  }

  on_done(done) {
    this.traceId = done.trace_id || this.traceId;
    this.citations = done.citations || [];
    renderAnswer(this.answer, done.answer || '', this.citations, this.library);
    const grade = this.grades.length ? this.grades[this.grades.length - 1] : null; // the whole evidence's
    append(this.after,
      done.abstained ? withheld(done, grade) : null,
      grade && grade.grade !== 'correct' && !done.abstained ? lowEvidence(grade) : null,
      done.cut_by ? cutShort(done) : null,
      sources(this.citations, this.library),
      done.active_retrieval ? activeRetrieval(done.active_retrieval) : null,
      verification(done.manifest || this.manifest, done),
      this.traceId ? feedback(this.traceId) : null,
      el('p', {class: 'meta'},
        this.traceId ? el('a', {href: `#/trace/${this.traceId}`, 'data-testid': 'trace-link'}, `Trace ${this.traceId}`) : null,
        ` · written by ${done.generator || 'nobody'} · confidence ${percent(done.confidence)}`));
  }
}

/** The answer as text, its `[n]` markers as buttons that open the source: never HTML, so a
 * Markdown image or link in it stays text and loads nothing. A shaped answer's table, headings and
 * list items become a table, headings and a list, built from text nodes the same way. */
function renderAnswer(node, text, citations, library) {
  const byRef = new Map(citations.map((c) => [String(c.ref), c]));
  clear(node);
  if (!/^\s*(\||### |- )/m.test(text)) {
    inline(node, text, byRef, library);
    return;
  }
  let table = null;
  let list = null;
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (trimmed.startsWith('|')) {
      const cells = trimmed.replace(/^\||\|$/g, '').split(/(?<!\\)\|/).map((c) => c.trim().replaceAll('\\|', '|'));
      if (cells.every((c) => /^:?-{2,}:?$/.test(c))) continue;
      if (!table) {
        table = el('table', {class: 'shaped', 'data-testid': 'answer-table'});
        table.append(el('tr', {}, cells.map((c) => el('th', {scope: 'col'}, c))));
        node.append(table);
        continue;
      }
      const row = el('tr', {});
      cells.forEach((c, i) => { const cell = el(i ? 'td' : 'th', i ? {} : {scope: 'row'}); inline(cell, c, byRef, library); row.append(cell); });
      table.append(row);
      continue;
    }
    table = null;
    if (trimmed.startsWith('- ')) {
      if (!list) { list = el('ul', {class: 'shaped'}); node.append(list); }
      const item = el('li', {});
      inline(item, trimmed.slice(2), byRef, library);
      list.append(item);
      continue;
    }
    list = null;
    if (trimmed.startsWith('### ')) node.append(el('h4', {}, trimmed.slice(4)));
    else if (trimmed) { const p = el('p', {}); inline(p, trimmed, byRef, library); node.append(p); }
  }
}

/** Text with its `[n]` markers as buttons that open the cited source. */
function inline(node, text, byRef, library) {
  let last = 0;
  for (const match of text.matchAll(/\[(\d{1,3}(?:,\s*\d{1,3})*)\]/g)) {
    const refs = match[1].split(',').map((r) => r.trim());
    if (!refs.some((r) => byRef.has(r))) continue;
    node.append(document.createTextNode(text.slice(last, match.index)));
    for (const ref of refs) {
      const citation = byRef.get(ref);
      if (!citation) { node.append(document.createTextNode(`[${ref}]`)); continue; }
      const button = el('button', {type: 'button', class: 'ref', 'aria-label': `Source ${ref}`}, `[${ref}]`);
      button.addEventListener('click', () => openCitation(citation, library, button));
      node.append(button);
    }
    last = match.index + match[0].length;
  }
  node.append(document.createTextNode(text.slice(last)));
}

function sourceLabel(c) {
  const where = [c.heading_path && c.heading_path.length ? c.heading_path[c.heading_path.length - 1] : '', pagesText(c.pages)]
    .filter(Boolean).join(', ');
  return `${c.title || c.source || c.chunk_id}${where ? ' — ' + where : ''}`;
}

function sources(citations, library) {
  if (!citations.length) return el('p', {class: 'muted'}, 'No sources.');
  return el('section', {class: 'sources', 'aria-label': 'Sources'},
    el('h3', {}, 'Sources'),
    el('ul', {class: 'chips'}, citations.map((c) => {
      const chip = el('button', {type: 'button', class: 'chip', 'data-testid': 'citation', 'data-ref': c.ref,
        'data-chunk': c.chunk_id}, el('span', {class: 'chip-n'}, c.ref), ' ', sourceLabel(c));
      chip.addEventListener('click', () => openCitation(c, library, chip));
      return el('li', {}, chip);
    })));
}

/** Why the answer was withheld: the draft's claims the sources did not support, or no draft at
 * all because the evidence did not answer the question. */
function withheld(done, grade) {
  const manifest = done.manifest || {};
  const claims = manifest.claims || [];
  const unsupported = claims.filter((c) => VERDICTS[c.verdict] !== 'supported');
  const why = claims.length
    ? `Only ${percent(manifest.supported_ratio)} of the draft's claims were supported by the sources it cited, below the abstention threshold.`
    : `No answer was drafted: the passages found do not answer the question${grade ? ` (evidence graded ${grade.grade}, ${percent(grade.score)})` : ''}.`;
  return el('div', {class: 'callout warn', role: 'note', 'data-testid': 'withheld'},
    el('p', {}, el('strong', {}, 'Answer withheld. '), why),
    unsupported.length ? el('ul', {}, unsupported.slice(0, 5).map((c) => el('li', {}, `${c.claim} — ${c.reason || VERDICTS[c.verdict]}`))) : null,
    el('p', {}, done.citations && done.citations.length ? 'The closest sources found are listed below.' : 'No source was found.'));
}

/** What active retrieval did: the unsupported claims searched for, and whether the answer shown
 * is the redraft (the first draft was never streamed). */
function activeRetrieval(active) {
  const queries = active.queries || [];
  const added = (active.added_chunk_ids || []).length;
  const what = !active.rounds
    ? 'every claim of the first draft was supported; nothing was searched again.'
    : `${queries.length} unsupported claim(s) searched for in ${active.rounds} round(s), ${added} passage(s) added; ` +
      (active.redrafted ? 'the answer shown was drafted again from them.' : 'the first draft stood.');
  return el('div', {class: 'muted', 'data-testid': 'active-retrieval'},
    el('p', {}, el('strong', {}, 'Active retrieval: '), what),
    queries.length ? el('ul', {}, queries.map((q) => el('li', {}, q))) : null);
}

function lowEvidence(grade) {
  const what = grade.grade === 'ambiguous'
    ? 'The passages found only partly match the question'
    : 'No passage found matches the question well';
  return el('div', {class: 'callout warn', role: 'note', 'data-testid': 'low-evidence'},
    el('p', {}, el('strong', {}, 'Low evidence. '), `${what} (graded ${grade.grade}, ${percent(grade.score)}). Check the sources before relying on the answer.`));
}

function cutShort(done) {
  const what = (done.generator || '').startsWith('llm:')
    ? 'the answer ends at its last finished sentence.'
    : 'it had finished no sentence, so the answer was written from the documents without it.';
  return el('div', {class: 'callout warn', role: 'note', 'data-testid': 'cut-short'},
    el('p', {}, el('strong', {}, 'Cut short. '), `The model was stopped at the server's limit (${done.cut_by}): ${what}`));
}

function verification(manifest, done) {
  if (!manifest || !manifest.verified) {
    return el('p', {class: 'muted', 'data-testid': 'unverified'}, manifest && manifest.method === 'disabled'
      ? 'Not verified: answer verification is turned off on this server.'
      : 'Nothing to verify: no answer was drafted.');
  }
  const claims = manifest.claims || [];
  const supported = claims.filter((c) => VERDICTS[c.verdict] === 'supported').length;
  const rows = claims.map((c) => [
    c.claim,
    (c.refs || []).map((r) => `[${r}]`).join(' '),
    el('span', {class: `verdict ${VERDICTS[c.verdict] || 'unsupported'}`}, VERDICTS[c.verdict] || 'unsupported'),
    percent(c.confidence),
    c.reason || '',
  ]);
  return el('details', {class: 'verification', open: true},
    el('summary', {}, `Verification: ${supported} of ${claims.length} claim(s) supported (${percent(manifest.supported_ratio)}, ${manifest.method}); answer confidence ${percent(done.confidence)}`),
    el('div', {class: 'table-wrap'},
      el('table', {'data-testid': 'manifest'},
        el('caption', {class: 'sr-only'}, 'Claims of the answer and their verdicts'),
        el('thead', {}, el('tr', {}, ['Claim', 'Refs', 'Verdict', 'Confidence', 'Reason'].map((h) => el('th', {scope: 'col'}, h)))),
        el('tbody', {}, rows.map((cells) => el('tr', {}, cells.map((c) => el('td', {}, c))))))));
}

/** Thumbs up or down with an optional comment, stored with the trace id. */
function feedback(traceId) {
  let rating = '';
  const id = `fb-${traceId}`;
  const status = el('p', {role: 'status', class: 'muted', 'data-testid': 'feedback-status'});
  const comment = el('input', {id: `${id}-comment`, type: 'text', maxlength: 2000, autocomplete: 'off'});
  const icon = (name) => el('img', {src: `/ui/${name}.svg`, alt: '', class: 'icon', width: 18, height: 18});
  const up = el('button', {type: 'button', class: 'thumb', 'aria-pressed': 'false', 'data-testid': 'thumb-up'}, icon('thumb-up'), ' Helpful');
  const down = el('button', {type: 'button', class: 'thumb', 'aria-pressed': 'false', 'data-testid': 'thumb-down'}, icon('thumb-down'), ' Not helpful');
  const send = el('button', {type: 'submit', 'data-testid': 'feedback-send'}, 'Send feedback');
  const pick = (value) => {
    rating = value;
    up.setAttribute('aria-pressed', String(value === 'up'));
    down.setAttribute('aria-pressed', String(value === 'down'));
  };
  up.addEventListener('click', () => pick('up'));
  down.addEventListener('click', () => pick('down'));
  const form = el('form', {class: 'feedback', 'aria-label': 'Feedback on this answer', novalidate: true},
    el('div', {class: 'thumbs', role: 'group', 'aria-label': 'Was this answer helpful?'}, up, down),
    el('label', {for: `${id}-comment`}, 'Comment (optional)'), comment, send, status);
  status.classList.add('feedback-status');
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!rating) {
      status.textContent = 'Choose helpful or not helpful first.';
      return;
    }
    send.disabled = true;
    try {
      await postJson('/v1/feedback', {trace_id: traceId, rating, comment: comment.value.trim()});
      status.textContent = 'Thank you: feedback stored.';
    } catch (error) {
      status.textContent = `Feedback not stored: ${error.message}`;
    } finally {
      send.disabled = false;
    }
  });
  return form;
}
