// The trace of one answer (GET /v1/traces/{id}), linkable as #/trace/<id>: the route, every tool
// call with its arguments and hits, the grades, the draft, the verification, the timings and the
// OpenTelemetry trace id.

import {getJson} from './api.js';
import {$, append, clear, el, percent, table, when} from './dom.js';
import {openChunk} from './evidence.js';

export function setupTrace() {
  $('#trace-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const id = $('#trace-id').value.trim().toLowerCase();
    if (/^[0-9a-f]{32}$/.test(id)) location.hash = `#/trace/${id}`;
    else showProblem('A trace id is 32 hexadecimal characters (the answer\'s Trace link has it).');
  });
}

function showProblem(text) {
  append(clear($('#trace-body')), el('p', {class: 'error', role: 'alert'}, text));
}

export async function showTrace(id) {
  $('#trace-id').value = id || '';
  const holder = clear($('#trace-body'));
  if (!id) return;
  append(holder, el('p', {class: 'muted', role: 'status'}, 'Loading the trace…'));
  let trace;
  try {
    trace = await getJson(`/v1/traces/${encodeURIComponent(id)}`);
  } catch (error) {
    showProblem(`Trace ${id}: ${error.message}`);
    return;
  }
  append(clear(holder), render(trace));
}

function json(value) {
  return el('code', {}, JSON.stringify(value));
}

function render(t) {
  const library = t.library || '';
  return el('article', {class: 'trace', 'data-testid': 'trace', 'aria-label': `Trace ${t.trace_id}`},
    el('h2', {}, t.question || '(no question)'),
    el('dl', {class: 'facts'},
      el('dt', {}, 'Trace id (OpenTelemetry)'), el('dd', {}, el('code', {'data-testid': 'trace-id'}, t.trace_id)),
      el('dt', {}, 'Library'), el('dd', {}, library),
      el('dt', {}, 'Asked by'), el('dd', {}, t.principal || ''),
      el('dt', {}, 'Started'), el('dd', {}, when(t.started_at)),
      el('dt', {}, 'Took'), el('dd', {}, `${Math.round(t.took_ms || 0)} ms`),
      t.session_id ? [el('dt', {}, 'Conversation'), el('dd', {}, t.session_id)] : null,
      t.request_id ? [el('dt', {}, 'Request id'), el('dd', {}, el('code', {}, t.request_id))] : null),
    route(t),
    tools(t.tool_calls || [], library),
    grades(t),
    draft(t),
    verification(t.verification),
    answer(t));
}

function route(t) {
  const r = t.route;
  if (!r) return null;
  return el('section', {'aria-label': 'Route'},
    el('h3', {}, 'Route'),
    el('p', {'data-testid': 'trace-route'}, `${r.mode} chosen by ${r.classifier}: ${r.reason || ''}`),
    r.standalone_question ? el('p', {}, `Read as: ${r.standalone_question} (${t.rewrite || 'rewritten'})`) : null,
    r.sub_questions && r.sub_questions.length ? el('p', {}, `Sub-questions: ${r.sub_questions.join(' | ')}`) : null,
    r.top_k ? el('p', {}, `Hits per search: ${r.top_k}`) : null);
}

function tools(calls, library) {
  const rows = calls.map((call, n) => [
    String(n + 1),
    call.tool,
    json(call.arguments),
    call.hint || '',
    call.result_count === undefined ? '' : String(call.result_count),
    call.took_ms === undefined ? '' : `${Math.round(call.took_ms)} ms`,
    hits(call, library),
  ]);
  return el('section', {'aria-label': 'Tool calls'},
    el('h3', {}, `Tool calls (${calls.length})`),
    table('', ['#', 'Tool', 'Arguments', 'Why', 'Results', 'Took', 'Hits'], rows, {'data-testid': 'trace-tools'}));
}

function hits(call, library) {
  if (call.ran) return el('code', {}, call.ran);
  if (call.error) return `error: ${call.error}`;
  if (call.recalled) return `recalled “${call.recalled.question}” (${percent(call.recalled.score)})`;
  const list = call.hits || [];
  if (!list.length) return '';
  return el('details', {},
    el('summary', {}, `${list.length} hit(s)`),
    el('ol', {class: 'hits'}, list.map((h) => {
      const open = el('button', {type: 'button', class: 'link'}, h.chunk_id);
      open.addEventListener('click', () => openChunk(h.chunk_id, library, open));
      const signals = (h.signals || []).map((s) => `${s.signal} ${Number(s.score).toFixed(3)}${s.rank ? ` #${s.rank}` : ''}`).join(', ');
      return el('li', {}, open, ` score ${Number(h.score).toFixed(3)}`, signals ? ` (${signals})` : '');
    })));
}

function grades(t) {
  const rows = (t.grades || []).map((g) => [g.query, g.grade, percent(g.score), g.grader || '']);
  return el('section', {'aria-label': 'Grades'},
    el('h3', {}, 'Grades'),
    rows.length ? table('', ['Search', 'Grade', 'Score', 'Grader'], rows) : el('p', {class: 'muted'}, 'None.'),
    t.grade ? el('p', {'data-testid': 'trace-grade'}, `Evidence as a whole: ${t.grade.grade} (${percent(t.grade.score)}, ${t.grade.hits} passage(s))`) : null,
    t.sql_notice ? el('p', {}, `Databases: ${t.sql_notice}`) : null);
}

function draft(t) {
  return el('section', {'aria-label': 'Draft'},
    el('h3', {}, `Draft (${t.generator || 'none'})`),
    t.no_draft_reason ? el('p', {}, `No draft: ${t.no_draft_reason}`) : null,
    t.llm_error ? el('p', {}, `LLM error: ${t.llm_error}`) : null,
    t.instructions_left_out && t.instructions_left_out.length
      ? el('div', {class: 'callout warn', role: 'note'}, el('p', {}, 'Sentences that instruct their reader, left out of the evidence:'),
        el('ul', {}, t.instructions_left_out.map((s) => el('li', {}, s))))
      : null,
    t.draft ? el('pre', {class: 'passage', 'data-testid': 'trace-draft'}, t.draft) : null);
}

function verification(found) {
  if (!found) return null;
  const v = found.manifest || {};
  const rows = (v.claims || []).map((c) => [c.claim_id || '', c.claim || '', (c.refs || []).join(', '),
    String(c.verdict || '').toLowerCase(), percent(c.confidence), c.reason || '']);
  return el('section', {'aria-label': 'Verification'},
    el('h3', {}, `Verification (${v.method || ''}, ${percent(v.supported_ratio)} supported${found.abstain ? ', withheld' : ''})`),
    rows.length ? table('', ['Id', 'Claim', 'Refs', 'Verdict', 'Confidence', 'Reason'], rows) : el('p', {class: 'muted'}, 'No claims.'));
}

function answer(t) {
  const citations = (t.citations || []).map((c) => [c.ref, el('code', {}, c.chunk_id), c.source || '',
    (c.heading_path || []).join(' › '), (c.pages || []).join(', ')]);
  return el('section', {'aria-label': 'Answer'},
    el('h3', {}, t.abstained ? 'Answer (withheld)' : 'Answer'),
    el('pre', {class: 'passage'}, t.answer || ''),
    el('p', {}, `Confidence ${percent(t.confidence)}`),
    citations.length ? table('Citations', ['Ref', 'Chunk', 'Source', 'Section', 'Pages'], citations) : null);
}
