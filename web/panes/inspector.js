// Event inspector: every data-channel event both ways (← received, → sent) and local notes (·), with
// the time since Start. Click a row for its pretty-printed JSON; the filter box keeps the rows whose
// type contains the text; Export downloads everything recorded as JSON Lines (the server log's shape:
// {seq, t_ms, dir: server|client|note, event}); "server log" opens
// GET /v1/realtime/calls/{id}/events, the call's events as the server saw them.
//
// window.voiceEdge.log holds the records ({t, dir: 'in'|'out'|'note', type, event?, detail?}), at most
// MAX_RECORDS, at once; the list on the page keeps the last MAX_ROWS, drawn every FLUSH_MS.
import { $, el, emit, on, request } from '../lib.js';

const MAX_ROWS = 2000;
const MAX_RECORDS = 20000;
const ARROW = { in: '←', out: '→', note: '·' };
const FLUSH_MS = 50;

export function init({ ve }) {
  const list = $('#events');
  const filter = $('#inspector-filter');
  const count = $('#inspector-count');
  const exportBtn = $('#inspector-export');
  const clearBtn = $('#inspector-clear');
  const serverLog = $('#server-log');
  const logStatus = $('#server-log-status');
  let records = (ve.log = []);
  let dropped = 0;

  function matches(type) {
    const q = filter.value.trim().toLowerCase();
    return !q || type.toLowerCase().includes(q);
  }

  function renderCount() {
    const rows = list.children.length;
    let shown = 0;
    for (const li of list.children) if (!li.hidden) shown++;
    count.textContent =
      `${shown} shown of ${rows} rows` + (records.length > rows ? ` (${records.length} recorded)` : '') + (dropped ? `, ${dropped} oldest dropped` : '');
  }

  /** One-line gist after the type: the text of a delta, an error's message, a response's status. */
  function summary(r) {
    const e = r.event;
    if (!e) return '';
    if (typeof e.delta === 'string') return JSON.stringify(e.delta);
    if (e.type === 'error' && e.error) return e.error.message || '';
    if (e.response && e.response.status && e.type === 'response.done') return e.response.status;
    if (typeof e.transcript === 'string') return JSON.stringify(e.transcript);
    if (e.type === 'response.function_call_arguments.done') return `${e.name || ''}(${e.arguments || ''})`;
    if (e.item && e.item.type) return `${e.item.type}${e.item.role ? ' ' + e.item.role : ''}${e.item.id ? ' ' + e.item.id : ''}`;
    return '';
  }

  // Rows are drawn in batches, off the event's own turn: reading the list's scroll position forces a
  // layout of the whole page, and doing that per event delayed the page's own setup marks (data
  // channel open) by tens of ms on a loaded machine. A burst of events costs one layout now.
  let pending = [];
  let flushTimer = null;

  function add(r) {
    records.push(r);
    if (records.length > MAX_RECORDS) {
      records.splice(0, records.length - MAX_RECORDS);
      dropped++;
    }
    pending.push(r);
    if (pending.length > MAX_ROWS) pending.splice(0, pending.length - MAX_ROWS);
    if (flushTimer == null) flushTimer = setTimeout(flush, FLUSH_MS);
  }

  function row(r) {
    const li = el(
      'li',
      { class: r.dir, dataset: { type: r.type, dir: r.dir } },
      el('span', { class: 't' }, `${Math.round(r.t || 0)} ms`),
      el('span', { class: 'dir' }, ARROW[r.dir]),
      el('span', { class: 'type' }, r.type),
      el('span', { class: 'gist' }, summary(r)),
    );
    li.hidden = !matches(r.type);
    li.addEventListener('click', (e) => {
      if (e.target.closest('pre')) return; // selecting text in the JSON does not close it
      toggle(li, r);
    });
    return li;
  }

  function flush() {
    flushTimer = null;
    if (!pending.length) return;
    const batch = pending;
    pending = [];
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 24;
    const frag = document.createDocumentFragment();
    for (const r of batch) frag.appendChild(row(r));
    list.appendChild(frag);
    while (list.children.length > MAX_ROWS) list.firstChild.remove();
    if (atBottom) list.scrollTop = list.scrollHeight;
    renderCount();
  }

  function toggle(li, r) {
    const open = li.querySelector('pre');
    if (open) {
      open.remove();
      li.classList.remove('open');
      return;
    }
    const body = r.event !== undefined ? JSON.stringify(r.event, null, 2) : r.detail || '(no detail)';
    li.appendChild(el('pre', {}, body));
    li.classList.add('open');
  }

  on('call:start', () => {
    records = ve.log = [];
    dropped = 0;
    pending = [];
    list.textContent = '';
    serverLog.removeAttribute('href');
    serverLog.classList.add('disabled');
    logStatus.textContent = '';
    renderCount();
  });
  on('call:path', ({ callUrl }) => {
    if (!callUrl) return;
    serverLog.href = `${callUrl}/events`;
    serverLog.classList.remove('disabled');
  });
  on('event:in', ({ t, ev }) => add({ t, dir: 'in', type: String(ev.type || '(no type)'), event: ev }));
  on('event:out', ({ t, ev }) => add({ t, dir: 'out', type: String(ev.type || '(no type)'), event: ev }));
  on('note', ({ t, text, detail }) => add({ t, dir: 'note', type: text, detail: detail || undefined }));

  // The server's log is JSON Lines (application/jsonl), which a browser would download rather than
  // show: fetch it, say what went wrong here if anything did, and open it as text in a new tab. The
  // tab is opened during the click (a popup opened after an await may be blocked).
  serverLog.addEventListener('click', async (e) => {
    e.preventDefault();
    const url = serverLog.getAttribute('href');
    if (!url) return;
    const w = window.open('', '_blank');
    logStatus.textContent = 'fetching the server log…';
    logStatus.dataset.kind = '';
    const r = await request('GET', url);
    if (!r.ok) {
      if (w) w.close();
      logStatus.textContent = r.error;
      logStatus.dataset.kind = 'error';
      emit('note', { t: ve.log.length ? ve.log[ve.log.length - 1].t : 0, text: `server log: ${r.status || 'failed'}`, detail: r.error });
      return;
    }
    const lines = r.text.split('\n').filter(Boolean).length;
    const blob = URL.createObjectURL(new Blob([r.text], { type: 'text/plain; charset=utf-8' }));
    if (w) {
      w.location.href = blob;
      logStatus.textContent = `server log: ${lines} events (opened in a new tab)`;
    } else {
      logStatus.textContent = `server log: ${lines} events; the new tab was blocked, allow popups or open ${url}`;
    }
    logStatus.dataset.kind = w ? 'ok' : 'error';
    setTimeout(() => URL.revokeObjectURL(blob), 60_000);
  });

  filter.addEventListener('input', () => {
    for (const li of list.children) li.hidden = !matches(li.dataset.type);
    renderCount();
  });

  clearBtn.addEventListener('click', () => {
    pending = [];
    list.textContent = '';
    renderCount();
  });

  exportBtn.addEventListener('click', () => {
    // The shape of the server's log (GET .../events): {seq, t_ms, dir: server|client|note, event},
    // so the two can be read side by side; t_ms counts from Start here, from the call's creation there.
    const lines = records.map((r, seq) => {
      const dir = r.dir === 'in' ? 'server' : r.dir === 'out' ? 'client' : 'note';
      const event = r.dir === 'note' ? { type: 'page.note', text: r.type, ...(r.detail ? { detail: r.detail } : {}) } : r.event;
      return JSON.stringify({ seq, t_ms: r.t, dir, event });
    });
    const blob = new Blob(lines.length ? [lines.join('\n') + '\n'] : [], { type: 'application/x-ndjson' });
    const url = URL.createObjectURL(blob);
    const id = ve.path && ve.path.callId ? ve.path.callId : 'no-call';
    const a = el('a', { href: url, download: `voice-edge-${id}-events.jsonl` });
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  });

  renderCount();
}
