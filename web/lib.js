// Small helpers shared by app.js and the panes (web/panes/*.js). No framework: DOM, fetch, a bus.
//
// The bus carries what happens on a call to every pane, so panes never reach into each other:
//   call:start   {}                      Start pressed; panes reset
//   call:path    {callId, callUrl, ...}  the 201 answer arrived (callUrl: the call's Location path)
//   call:end     {state}                 hung up or failed
//   channel:open {}                      the oai-events data channel opened
//   event:in     {t, ev}                 a server event (parsed JSON) arrived on the data channel
//   event:out    {t, ev}                 the page sent a client event (whoever called dc.send)
//   note         {t, text, detail}       a local note: ICE/peer/DTLS state, HTTP results, pane errors
// `t` is ms since Start (performance.now() based).

const listeners = new Map();

/** Subscribe to a bus topic. A listener that throws is reported as a note, never swallowed. */
export function on(topic, fn) {
  if (!listeners.has(topic)) listeners.set(topic, []);
  listeners.get(topic).push(fn);
}

/** Deliver `detail` to every listener of `topic`, in subscription order. */
export function emit(topic, detail) {
  for (const fn of listeners.get(topic) || []) {
    try {
      fn(detail);
    } catch (e) {
      console.error(`voice-edge demo: a ${topic} listener threw`, e);
      if (topic !== 'note') emit('note', { t: detail && detail.t, text: `page error in a ${topic} handler: ${e.message}`, detail: e.stack });
    }
  }
}

/** document.querySelector */
export const $ = (sel, root = document) => root.querySelector(sel);

/** Create an element: el('li', {class: 'x', dataset: {id: 1}, onclick}, 'text', child...). */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'hidden' || k === 'selected') e[k] = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c != null && c !== false) e.append(c instanceof Node ? c : String(c));
  return e;
}

/** The message of a Realtime-shaped error body ({"error":{"message"}}), else the text, else the status text. */
export function errorDetail(body, res) {
  try {
    const j = JSON.parse(body);
    if (j && j.error && j.error.message) return j.error.code ? `${j.error.message} (${j.error.code})` : j.error.message;
  } catch (_) {
    /* not JSON */
  }
  return (body || '').trim() || (res && res.statusText) || 'no detail';
}

/**
 * LAN mode's pairing key, from the fragment of the URL the server printed (`#key=…`): browsers
 * never send a fragment, so only this page knows it. `null` when the page was opened without one.
 */
export const pairingKey = new URLSearchParams(window.location.hash.slice(1)).get('key');

/** `headers` plus the pairing key as the bearer key, when there is one. */
export function withKey(headers = {}) {
  return pairingKey ? { ...headers, Authorization: `Bearer ${pairingKey}` } : headers;
}

/** A WebSocket's sub-protocols: `realtime`, and the pairing key where headers cannot go. */
export function socketProtocols() {
  return pairingKey ? ['realtime', `openai-insecure-api-key.${pairingKey}`] : ['realtime'];
}

/**
 * fetch() that never throws: {ok, status, text, json, error}. `error` is a one-line description for
 * non-2xx answers and network failures, ready to show.
 */
export async function request(method, url, body) {
  const init = { method, headers: withKey() };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(url, init);
  } catch (e) {
    return { ok: false, status: 0, text: '', json: null, error: `${method} ${url} failed: ${e.message}` };
  }
  const text = await res.text().catch(() => '');
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch (_) {
    /* not JSON */
  }
  return {
    ok: res.ok,
    status: res.status,
    text,
    json,
    error: res.ok ? null : `${method} ${url} → ${res.status}: ${errorDetail(text, res)}`,
  };
}

/** Milliseconds, rounded for display: "12.3 ms", or "–" for null. */
export function ms(v, digits = 1) {
  return typeof v === 'number' && Number.isFinite(v) ? `${v.toFixed(digits)} ms` : '–';
}

export function median(values) {
  if (!values.length) return null;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
