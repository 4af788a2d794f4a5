// An event list: the rows the inspector draws (time since Start, ← received / → sent / · note, the
// type, a one-line gist; click a row for its pretty-printed JSON), shared by panes/inspector.js and
// panes/sideband.js. Records are {t, dir: 'in'|'out'|'note', type, event?, detail?}.
//
// Rows are drawn in batches, off the event's own turn: reading the list's scroll position forces a
// layout of the whole page, and doing that per event delayed the page's own setup marks (data channel
// open) by tens of ms on a loaded machine. A burst of events costs one layout now.
import { el } from '../lib.js';

const ARROW = { in: '←', out: '→', note: '·' };
const FLUSH_MS = 50;

/** One-line gist after the type: the text of a delta, an error's message, a response's status. */
export function summary(r) {
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

/**
 * Rows for the records added to `list` (an <ol class="events">), the last `maxRows` kept.
 * `visible(type)` says whether a row shows (a filter); `onDraw()` runs after each batch is drawn.
 * Returns {add(record), clear(), refilter()}.
 */
export function eventList(list, { maxRows = 2000, visible = () => true, onDraw = () => {} } = {}) {
  let pending = [];
  let flushTimer = null;

  function row(r) {
    const li = el(
      'li',
      { class: r.dir, dataset: { type: r.type, dir: r.dir } },
      el('span', { class: 't' }, `${Math.round(r.t || 0)} ms`),
      el('span', { class: 'dir' }, ARROW[r.dir]),
      el('span', { class: 'type' }, r.type),
      el('span', { class: 'gist' }, summary(r)),
    );
    li.hidden = !visible(r.type);
    li.addEventListener('click', (e) => {
      if (e.target.closest('pre')) return; // selecting text in the JSON does not close it
      toggle(li, r);
    });
    return li;
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

  function flush() {
    flushTimer = null;
    if (!pending.length) return;
    const batch = pending;
    pending = [];
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 24;
    const frag = document.createDocumentFragment();
    for (const r of batch) frag.appendChild(row(r));
    list.appendChild(frag);
    while (list.children.length > maxRows) list.firstChild.remove();
    if (atBottom) list.scrollTop = list.scrollHeight;
    onDraw();
  }

  return {
    add(r) {
      pending.push(r);
      if (pending.length > maxRows) pending.splice(0, pending.length - maxRows);
      if (flushTimer == null) flushTimer = setTimeout(flush, FLUSH_MS);
    },
    clear() {
      pending = [];
      list.textContent = '';
    },
    refilter() {
      for (const li of list.children) li.hidden = !visible(li.dataset.type);
    },
  };
}
