// Event inspector: every data-channel event both ways (← received, → sent) and local notes (·), with
// the time since Start. Click a row for its pretty-printed JSON; the filter box keeps the rows whose
// type contains the text; Export downloads everything recorded as JSON Lines (the server log's shape:
// {seq, t_ms, dir: server|client|note, event}); "server log" opens
// GET /v1/realtime/calls/{id}/events, the call's events as the server saw them.
//
// window.voiceEdge.log holds the records ({t, dir: 'in'|'out'|'note', type, event?, detail?}), at most
// MAX_RECORDS, at once; the list on the page keeps the last MAX_ROWS, drawn in batches (eventlist.js,
// which the sideband pane's list shares).
import { $, el, emit, on, request } from '../lib.js';
import { eventList } from './eventlist.js';

const MAX_ROWS = 2000;
const MAX_RECORDS = 20000;

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
    const drawn = list.children.length;
    let shown = 0;
    for (const li of list.children) if (!li.hidden) shown++;
    count.textContent =
      `${shown} shown of ${drawn} rows` + (records.length > drawn ? ` (${records.length} recorded)` : '') + (dropped ? `, ${dropped} oldest dropped` : '');
  }

  const rows = eventList(list, { maxRows: MAX_ROWS, visible: matches, onDraw: renderCount });

  function add(r) {
    records.push(r);
    if (records.length > MAX_RECORDS) {
      records.splice(0, records.length - MAX_RECORDS);
      dropped++;
    }
    rows.add(r);
  }

  on('call:start', () => {
    records = ve.log = [];
    dropped = 0;
    rows.clear();
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
    rows.refilter();
    renderCount();
  });

  clearBtn.addEventListener('click', () => {
    rows.clear();
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
