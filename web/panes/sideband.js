// Sideband: a second WebSocket on the live call, GET /v1/realtime?call_id=ID, as an app's server
// attaches to watch and steer a call while the browser holds the media. It receives session.created
// (the session as it is now), then every server event the data channel gets; a client event sent on
// it goes to the same conversation (its response plays on this page, and the inspector shows its
// events); the server closes it when the call ends (1000 "call ended"). At most 4 per call.
//
// The list is the inspector's (eventlist.js): ← received, → sent, · local note. A refused attach
// (no such call, 409 the call has 4 already, a key the server does not accept) closes before it
// opens: browsers then say 1006 and hide the HTTP status, so the pane says that much.
// The page makes its calls without a key, so the socket offers only the `realtime` sub-protocol; a
// page with a key would add 'openai-insecure-api-key.' + key (the call's creating key may attach).
//
// window.voiceEdge.sideband: {state: idle|connecting|open|closed, url, protocol, events (types
// received), log (records), close: {code, reason, wasClean} | null, attach(), send(ev), detach()}.
import { $, on, socketProtocols } from '../lib.js';
import { eventList } from './eventlist.js';

const PRESETS = {
  say: {
    type: 'response.create',
    response: { instructions: 'Hello from the sideband: a second socket asked for this response.' },
  },
  instructions: [
    { type: 'session.update', session: { type: 'realtime', instructions: 'Answer briefly.' } },
    { type: 'response.create' },
  ],
  'vad-off': { type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } },
};

export function init({ ve, now, note }) {
  const attachBtn = $('#sideband-attach');
  const detachBtn = $('#sideband-detach');
  const sendBtn = $('#sideband-send');
  const preset = $('#sideband-preset');
  const box = $('#sideband-json');
  const status = $('#sideband-status');
  const rows = eventList($('#sideband-events'), { maxRows: 1000 });

  let callId = null; // the live call's id, once its answer arrived
  let live = false; // the data channel opened and the call has not ended
  let ws = null;
  const sb = (ve.sideband = { state: 'idle', url: null, protocol: null, events: [], log: [], close: null, attach, send, detach });

  function add(r) {
    sb.log.push(r);
    rows.add(r);
  }

  function say(text, kind = '') {
    status.textContent = text;
    status.dataset.kind = kind;
  }

  function render() {
    const open = sb.state === 'open';
    attachBtn.disabled = !live || !callId || sb.state === 'connecting' || open;
    detachBtn.disabled = !(open || sb.state === 'connecting');
    sendBtn.disabled = !open;
  }

  function socketUrl(id) {
    const proto = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
    return `${proto}//${window.location.host}/v1/realtime?call_id=${encodeURIComponent(id)}`;
  }

  /** Open the sideband on the live call. Throws (with a message to show) when there is none. */
  function attach() {
    if (!live || !callId) throw new Error('no live call: press Start first');
    if (ws && (sb.state === 'open' || sb.state === 'connecting')) throw new Error('already attached');
    sb.events = [];
    sb.log = [];
    sb.close = null;
    sb.protocol = null;
    rows.clear();
    const url = (sb.url = socketUrl(callId));
    const s = (ws = new WebSocket(url, socketProtocols()));
    let opened = false;
    sb.state = 'connecting';
    add({ t: now(), dir: 'note', type: `connecting to ${url}` });
    say('connecting…');
    render();
    s.addEventListener('open', () => {
      if (s !== ws) return;
      opened = true;
      sb.state = 'open';
      sb.protocol = s.protocol;
      add({ t: now(), dir: 'note', type: `open (sub-protocol ${s.protocol || 'none'})` });
      note(`sideband attached to ${callId}`);
      say('attached: receiving the call’s server events', 'ok');
      render();
    });
    s.addEventListener('message', (e) => {
      if (s !== ws) return;
      let ev;
      try {
        ev = JSON.parse(typeof e.data === 'string' ? e.data : '');
      } catch (_) {
        add({ t: now(), dir: 'note', type: '(unparseable message)', detail: String(e.data) });
        return;
      }
      const type = ev && typeof ev.type === 'string' ? ev.type : '(no type)';
      sb.events.push(type);
      add({ t: now(), dir: 'in', type, event: ev });
    });
    s.addEventListener('close', (e) => {
      if (s !== ws) return;
      sb.state = 'closed';
      sb.close = { code: e.code, reason: e.reason, wasClean: e.wasClean };
      const why = `${e.code}${e.reason ? ` "${e.reason}"` : ''}${e.wasClean ? '' : ', not clean'}`;
      const text = opened ? `closed: ${why}` : `refused: ${why} (no such call, the call has 4 sidebands, or the key was refused)`;
      add({ t: now(), dir: 'note', type: text });
      note(`sideband ${text}`);
      say(text, opened && e.code === 1000 ? '' : 'error');
      render();
    });
  }

  /** Send a client event (an object) on the sideband; throws when it is not open. */
  function send(ev) {
    if (!ws || sb.state !== 'open') throw new Error('the sideband is not open: attach it first');
    ws.send(JSON.stringify(ev));
    add({ t: now(), dir: 'out', type: String(ev.type || '(no type)'), event: ev });
    note(`sideband sent ${ev.type || '(no type)'}`);
  }

  function detach() {
    if (ws && (sb.state === 'open' || sb.state === 'connecting')) ws.close(1000, 'detached by the page');
  }

  /** The box's events: one JSON object, or an array of them sent in order. Throws with a message. */
  function boxEvents() {
    let v;
    try {
      v = JSON.parse(box.value);
    } catch (e) {
      throw new Error(`not JSON: ${e.message}`);
    }
    const list = Array.isArray(v) ? v : [v];
    if (!list.length || !list.every((x) => x && typeof x === 'object' && !Array.isArray(x) && typeof x.type === 'string')) {
      throw new Error('give an event object with a string "type", or an array of them');
    }
    return list;
  }

  function fill(name) {
    box.value = JSON.stringify(PRESETS[name], null, 2);
  }

  attachBtn.addEventListener('click', () => {
    try {
      attach();
    } catch (e) {
      say(e.message, 'error');
    }
  });
  detachBtn.addEventListener('click', detach);
  sendBtn.addEventListener('click', () => {
    try {
      const evs = boxEvents();
      for (const ev of evs) send(ev);
      say(`sent ${evs.map((x) => x.type).join(', ')}`, 'ok');
    } catch (e) {
      say(e.message, 'error');
    }
  });
  preset.addEventListener('change', () => fill(preset.value));

  on('call:start', () => {
    live = false;
    callId = null;
    // A socket left from the last call closes with it; a new call starts a new list.
    if (ws && (sb.state === 'open' || sb.state === 'connecting')) ws.close(1000, 'new call');
    ws = null;
    Object.assign(sb, { state: 'idle', url: null, protocol: null, events: [], log: [], close: null });
    rows.clear();
    say('attach once the call is up');
    render();
  });
  on('call:path', ({ callId: id }) => {
    callId = id || null;
    render();
  });
  on('channel:open', () => {
    live = true;
    if (sb.state === 'idle') say('the call is up: attach a sideband');
    render();
  });
  on('call:end', () => {
    live = false;
    // The server closes the sideband itself when the call ends: that close is what the pane shows.
    if (sb.state === 'open') say('the call ended: waiting for the server to close the sideband…');
    render();
  });

  fill(preset.value);
  say('attach once a call is up');
  render();
}
