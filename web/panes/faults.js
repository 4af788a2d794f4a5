// Faults: break the call on purpose and watch the other panes react. Against the call's
//   POST   {callUrl}/faults  {"type":"network","loss":0..1,"delay_ms","jitter_ms","bandwidth_kbps"
//                             (0 = unlimited),"direction":"both"|"to_client"|"from_client"}
//                            {"type":"blackout","duration_ms"} {"type":"nat_rebind"}
//                            {"type":"session_expired"} {"type":"relay_restart"}
//   DELETE {callUrl}/faults  clears the network impairment
//   GET    {callUrl}/faults  the call's fault state
// (relay_restart: 403 dev_admin_disabled unless the server runs with --dev-admin.) Every answer, error or not, is
// shown in the pane's log and noted in the inspector. "ICE restart" does what an app does after a
// blackout or a NAT rebinding: pc.restartIce() and a new offer PATCHed onto the call.
// window.voiceEdge.faultLog: [{t, what, status, ok, body, error}].
import { $, el, on, request } from '../lib.js';

export function init({ ve, note, iceRestart, callUrl, now }) {
  const type = $('#fault-type');
  const form = $('#fault-form');
  const log = $('#fault-log');

  function value(name) {
    const input = form.elements[name];
    return input ? input.value : '';
  }

  function num(name, { min = 0, max = Infinity } = {}) {
    const raw = value(name).trim();
    const v = raw === '' ? 0 : Number(raw);
    if (!Number.isFinite(v) || v < min || v > max) throw new Error(`${name} must be a number from ${min} to ${max}`);
    return v;
  }

  /** The POST body for the chosen fault; throws with a message to show. */
  function body() {
    switch (type.value) {
      case 'network':
        return {
          type: 'network',
          loss: num('loss', { max: 1 }),
          delay_ms: num('delay_ms'),
          jitter_ms: num('jitter_ms'),
          bandwidth_kbps: num('bandwidth_kbps'),
          direction: value('direction') || 'both',
        };
      case 'blackout':
        return { type: 'blackout', duration_ms: num('duration_ms', { min: 1 }) };
      default:
        return { type: type.value };
    }
  }

  function showFields() {
    for (const f of form.querySelectorAll('[data-for]')) f.hidden = f.dataset.for !== type.value;
  }

  function record(what, r) {
    const entry = { t: now(), what, status: r.status, ok: r.ok, body: r.text, error: r.error || null };
    ve.faultLog.push(entry);
    const text = r.error ? r.error : `${what} → ${r.status} ${r.text ? r.text.trim() : ''}`;
    log.appendChild(el('li', { class: r.ok ? 'ok' : 'bad' }, el('span', { class: 't' }, `${Math.round(entry.t)} ms`), text));
    log.scrollTop = log.scrollHeight;
    note(`fault: ${what} → ${r.status || 'failed'}`, r.error || r.text || undefined);
    return entry;
  }

  function fail(what, message) {
    return record(what, { ok: false, status: 0, text: '', error: `${what}: ${message}` });
  }

  async function call(method, payload) {
    const url = callUrl();
    const what = `${method} faults${payload ? ' ' + JSON.stringify(payload) : ''}`;
    if (!url) return fail(what, 'no call yet: press Start first');
    return record(what, await request(method, `${url}/faults`, payload));
  }

  type.addEventListener('change', showFields);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    let payload;
    try {
      payload = body();
    } catch (err) {
      fail(`POST faults`, err.message);
      return;
    }
    call('POST', payload);
  });
  $('#fault-clear').addEventListener('click', () => call('DELETE'));
  $('#fault-state').addEventListener('click', () => call('GET'));
  $('#ice-restart').addEventListener('click', async () => {
    try {
      const r = await iceRestart();
      record('ICE restart (PATCH call)', { ok: true, status: r.status, text: `answered in ${r.ms} ms` });
    } catch (err) {
      fail('ICE restart', err.message);
    }
  });

  // Exposed so tests and the console can drive the same calls the buttons make.
  ve.faults = { post: (payload) => call('POST', payload), clear: () => call('DELETE'), state: () => call('GET') };

  on('call:start', () => {
    ve.faultLog = [];
    log.textContent = '';
  });
  ve.faultLog = [];
  showFields();
}
