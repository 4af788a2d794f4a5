// voice-edge demo: the OpenAI Realtime WebRTC browser flow against this server.
// Plain JS as ES modules, no build step. State for tests lives in window.voiceEdge.
//
// This file owns the call: microphone, RTCPeerConnection, the POST /v1/realtime/calls offer/answer,
// the oai-events data channel, the codec (picker + what was negotiated), setup timings, the path, hang-up
// and ICE restart. Everything it sees goes
// out on the bus (lib.js) to the panes, one file each under panes/:
//   inspector.js     every data-channel event both ways + local notes; filter, export, server log
//   conversation.js  user and assistant transcripts per item, tool calls, failed responses
//   tools.js         declare tools + tool_choice (session.update); answer function calls
//   netstats.js      getStats every second (RTT, jitter, loss, bitrate); per-turn latency
//   faults.js        the call's /faults API (network impairment, blackout, ...) and ICE restart
//   sideband.js      a second WebSocket on the call (GET /v1/realtime?call_id=): its events, send, close
import { $, emit, errorDetail, pairingKey, withKey } from './lib.js';
import * as conversation from './panes/conversation.js';
import * as faults from './panes/faults.js';
import * as inspector from './panes/inspector.js';
import * as netstats from './panes/netstats.js';
import * as sideband from './panes/sideband.js';
import * as tools from './panes/tools.js';

{
  const CALLS_URL = '/v1/realtime/calls';
  // OpenAI's Live API: the offer and the session config go as JSON, the answer comes back as JSON.
  const LIVE_URL = '/v1/live/sessions';
  const STEPS = ['offerPosted', 'answerReceived', 'iceConnected', 'dtlsConnected', 'dataChannelOpen', 'firstAudio'];

  const ui = {
    start: $('#start'),
    stop: $('#stop'),
    state: $('#state'),
    error: $('#error'),
    audio: $('#remote'),
    stats: $('#audio-stats'),
    model: $('#model'),
    api: $('#api'),
    scriptName: $('#script-name'),
    codec: $('#codec'),
    codecShown: $('#codec-shown'),
  };

  // Exposed for tests and for poking around in the console.
  const ve = (window.voiceEdge = {
    state: 'idle',
    timings: emptyTimings(),
    path: emptyPath(),
    events: [], // types of the server events received, in order
    error: null,
    hangup: null, // {status, ok} or {error} once the hangup POST finished
    pc: null,
    dc: null,
    model: null, // the model this call asked for
    api: 'realtime', // 'realtime' or 'live': which protocol this call speaks
    codec: emptyCodec(), // {asked: 'opus'|'pcmu'|'pcma', answer: 'PCMU/8000', stats: 'audio/PCMU'}
    send, // send(event): a client event on the data channel (throws when it is not open)
    iceRestart, // iceRestart(): pc.restartIce() + PATCH the call with the new offer
    injectServerEvent, // injectServerEvent(ev): feed the panes a server event the server never sent
  });

  let call = null; // per-call private bits: {t0, mic, statsTimer, hangupUrl, callUrl, ended}

  /** ms since Start of the current call (0 before any). */
  function now() {
    return call ? Math.round((performance.now() - call.t0) * 10) / 10 : 0;
  }

  function emptyTimings() {
    const t = {};
    for (const s of STEPS) t[s] = null;
    return t;
  }
  function emptyCodec(asked = null) {
    return { asked, answer: null, stats: null };
  }
  function emptyPath() {
    return { media: null, relay: null, cluster: null, transceiver: null, worker: null, callId: null };
  }

  // ---- rendering -------------------------------------------------------

  function setState(state) {
    ve.state = state;
    ui.state.textContent = state;
    ui.state.dataset.state = state;
    const live = state === 'connecting' || state === 'connected';
    ui.start.disabled = live;
    ui.stop.disabled = !live;
  }

  function showError(message) {
    ve.error = message;
    if (message) {
      ui.error.textContent = message;
      ui.error.hidden = false;
    } else {
      ui.error.textContent = '';
      ui.error.hidden = true;
    }
  }

  function renderSteps() {
    for (const s of STEPS) {
      const el = document.querySelector(`[data-step="${s}"]`);
      if (!el) continue;
      const v = ve.timings[s];
      el.querySelector('.ms').textContent = v == null ? '–' : `${Math.round(v)} ms`;
      if (v == null) {
        el.removeAttribute('data-ms');
        el.classList.remove('done');
      } else {
        el.dataset.ms = String(v);
        el.classList.add('done');
      }
    }
  }

  function renderCodec() {
    const { answer, stats } = ve.codec;
    if (!ui.codecShown) return;
    ui.codecShown.textContent = answer || stats ? `${answer || '–'} in the answer · ${stats || '–'} received (getStats)` : '–';
  }

  function renderPath() {
    for (const [k, v] of Object.entries(ve.path)) {
      const el = document.querySelector(`[data-path="${k}"]`);
      if (el) el.textContent = v == null || v === '' ? '–' : v;
    }
  }

  /** A local note in the event inspector (state changes, HTTP results, errors). */
  function note(text, detail) {
    emit('note', { t: now(), text, detail: detail || null });
  }

  function mark(step) {
    if (!call || ve.timings[step] != null) return;
    ve.timings[step] = Math.round((performance.now() - call.t0) * 10) / 10;
    renderSteps();
  }

  // ---- the call --------------------------------------------------------

  async function start() {
    if (call && !call.ended) return;
    ve.timings = emptyTimings();
    ve.path = emptyPath();
    ve.events = [];
    ve.pc = null;
    ve.dc = null;
    ve.hangup = null;
    ve.codec = emptyCodec(ui.codec ? ui.codec.value : 'opus');
    showError(null);
    renderSteps();
    renderPath();
    renderCodec();
    ui.stats.textContent = 'no audio yet';
    let model;
    try {
      model = modelValue();
    } catch (e) {
      showError(e.message);
      return;
    }
    ve.model = model;
    ve.api = ui.api ? ui.api.value : 'realtime';
    setState('connecting');

    const c = (call = { t0: performance.now(), mic: null, statsTimer: null, hangupUrl: null, callUrl: null, ended: false });
    emit('call:start', { t: 0, model });

    try {
      try {
        c.mic = await navigator.mediaDevices.getUserMedia({ audio: true });
      } catch (e) {
        throw new Error(`Microphone unavailable: ${e.name}: ${e.message}`);
      }
      if (c.ended) {
        for (const t of c.mic.getTracks()) t.stop();
        return;
      }

      const pc = new RTCPeerConnection();
      ve.pc = pc;
      watchPeer(pc, c);

      pc.ontrack = (e) => {
        ui.audio.srcObject = e.streams && e.streams[0] ? e.streams[0] : new MediaStream([e.track]);
        const p = ui.audio.play();
        if (p && p.catch) p.catch((err) => note(`audio play blocked: ${err.name}`, err.message));
      };

      const track = c.mic.getAudioTracks()[0];
      pc.addTrack(track);
      if (ve.codec.asked && ve.codec.asked !== 'opus') limitCodec(pc, ve.codec.asked);

      const dc = pc.createDataChannel('oai-events');
      // Every client event goes through dc.send, whoever calls it (this page, a pane, a test or the
      // console through window.voiceEdge.dc): wrap it so the inspector sees them all.
      const rawSend = dc.send.bind(dc);
      dc.send = (data) => {
        rawSend(data);
        if (c !== call) return;
        let ev;
        try {
          ev = JSON.parse(data);
        } catch (_) {
          ev = { type: '(not JSON)', data: String(data) };
        }
        emit('event:out', { t: now(), ev });
      };
      ve.dc = dc;
      watchChannel(dc, c);

      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      watchDtls(pc, c);

      mark('offerPosted');
      const live = ve.api === 'live';
      const url = live ? LIVE_URL : `${CALLS_URL}?model=${encodeURIComponent(model)}`;
      let res;
      try {
        res = await fetch(
          url,
          live
            ? {
                method: 'POST',
                headers: withKey({ 'Content-Type': 'application/json' }),
                body: JSON.stringify({ session: { model }, transport: { type: 'webrtc', sdp: offer.sdp } }),
              }
            : { method: 'POST', headers: withKey({ 'Content-Type': 'application/sdp' }), body: offer.sdp },
        );
      } catch (e) {
        throw new Error(`POST ${url} failed: ${e.message}`);
      }
      const text = await res.text();
      if (!res.ok) throw new Error(`Call request failed with status ${res.status}: ${errorDetail(text, res)}`);
      let body = text;
      if (live) {
        try {
          body = JSON.parse(text).transport.sdp;
        } catch (e) {
          throw new Error(`POST ${url}: no transport.sdp in the answer (${e.message})`);
        }
      }
      if (c.ended) return;
      mark('answerReceived');

      const location = res.headers.get('Location');
      if (location) {
        c.callUrl = new URL(location, window.location.href).pathname.replace(/\/$/, '');
        c.hangupUrl = c.callUrl + '/hangup';
      }
      ve.path = {
        // Where this browser sends media, as the answer's candidate names it.
        media: res.headers.get('X-Voice-Edge-Media'),
        relay: res.headers.get('X-Voice-Edge-Relay'),
        cluster: res.headers.get('X-Voice-Edge-Cluster'),
        transceiver: res.headers.get('X-Voice-Edge-Transceiver'),
        worker: res.headers.get('X-Voice-Edge-Worker'),
        callId: location ? location.replace(/\/$/, '').split('/').pop() : null,
      };
      if (!c.callUrl && ve.path.callId) c.callUrl = `${CALLS_URL}/${encodeURIComponent(ve.path.callId)}`;
      if (!c.hangupUrl && c.callUrl) c.hangupUrl = `${c.callUrl}/hangup`;
      renderPath();
      emit('call:path', { t: now(), ...ve.path, callUrl: c.callUrl });
      ve.codec.answer = answerCodec(body);
      renderCodec();
      note(`codec: ${ve.codec.answer || 'none named in the answer'} (asked for ${ve.codec.asked})`);

      await pc.setRemoteDescription({ type: 'answer', sdp: body });
      watchDtls(pc, c); // the transport exists by now in every browser
      pollStats(pc, c);
    } catch (e) {
      fail(c, e && e.message ? e.message : String(e));
    }
  }

  /**
   * Offer only `codec` ('pcmu' or 'pcma'), as telephony pages do: setCodecPreferences on the audio
   * transceiver before the offer. The server answers an offer limited to G.711 with it.
   */
  function limitCodec(pc, codec) {
    const transceiver = pc.getTransceivers()[0];
    if (!transceiver || typeof transceiver.setCodecPreferences !== 'function' || !RTCRtpReceiver.getCapabilities) {
      throw new Error(`This browser cannot limit the offer to ${codec.toUpperCase()} (no setCodecPreferences)`);
    }
    const caps = RTCRtpReceiver.getCapabilities('audio');
    const only = (caps ? caps.codecs : []).filter((x) => x.mimeType.toLowerCase() === `audio/${codec}`);
    if (!only.length) throw new Error(`This browser offers no ${codec.toUpperCase()} codec`);
    transceiver.setCodecPreferences(only);
  }

  /** The answer's audio codec as "NAME/RATE": the first format of its m=audio line, by its rtpmap. */
  function answerCodec(sdp) {
    const lines = String(sdp).split(/\r?\n/);
    const m = lines.find((l) => l.startsWith('m=audio '));
    const pt = m ? m.trim().split(' ')[3] : null;
    if (pt == null) return null;
    const map = lines.find((l) => l.startsWith(`a=rtpmap:${pt} `));
    if (map) return map.slice(`a=rtpmap:${pt} `.length).trim().split('/').slice(0, 2).join('/');
    return { 0: 'PCMU/8000', 8: 'PCMA/8000' }[pt] || `payload type ${pt}`;
  }

  function watchPeer(pc, c) {
    pc.addEventListener('iceconnectionstatechange', () => {
      if (c !== call) return;
      const s = pc.iceConnectionState;
      note(`ice ${s}`);
      if (s === 'connected' || s === 'completed') mark('iceConnected');
      if (s === 'failed') fail(c, iceFailure());
    });
    pc.addEventListener('connectionstatechange', () => {
      if (c !== call) return;
      const s = pc.connectionState;
      note(`peer ${s}`);
      if (s === 'connected') {
        mark('dtlsConnected'); // fallback when RTCDtlsTransport events are unavailable
        if (!c.ended) setState('connected');
      } else if (s === 'failed') {
        fail(c, 'Peer connection failed (ICE or DTLS)');
      }
    });
  }

  function iceFailure() {
    return `ICE failed: no UDP connectivity to ${ve.path.media || 'the media address'}`;
  }

  function watchDtls(pc, c) {
    const sender = pc.getSenders()[0];
    const t = sender && sender.transport;
    if (!t || c.dtlsWatched === t) return;
    c.dtlsWatched = t;
    const check = (e) => {
      if (c !== call) return;
      if (e) note(`dtls ${t.state}`);
      if (t.state === 'connected') mark('dtlsConnected');
      // close_notify from the server: it ended the call (hang-up elsewhere, session expiry, drain).
      if (t.state === 'closed' && !c.ended) endedByServer(c);
      if (t.state === 'failed') {
        // Firefox fails its DTLS transport when ICE fails, before any ICE state event: say which.
        if (ve.timings.iceConnected == null) fail(c, iceFailure());
        else fail(c, 'DTLS handshake failed');
      }
    };
    t.addEventListener('statechange', check);
    check();
  }

  function watchChannel(dc, c) {
    dc.addEventListener('open', () => {
      if (c !== call) return;
      mark('dataChannelOpen');
      if (ve.api === 'live') {
        // A Live session is configured when it is created; it starts with session.started.
        emit('channel:open', { t: now() });
        return;
      }
      const update = {
        type: 'session.update',
        session: {
          type: 'realtime',
          model: ve.model,
          output_modalities: ['audio'],
          // The stub models have no recognizer; with transcription on, the user's items get a
          // bracketed note ("[speech, 2.4 s]") that the conversation pane shows.
          audio: { input: { transcription: { model: 'whisper-1' } } },
        },
      };
      emit('channel:open', { t: now() });
      dc.send(JSON.stringify(update));
    });
    dc.addEventListener('message', (e) => {
      if (c !== call) return;
      let ev;
      try {
        ev = JSON.parse(typeof e.data === 'string' ? e.data : '');
      } catch (_) {
        note('(unparseable message)', String(e.data));
        return;
      }
      const type = ev && typeof ev.type === 'string' ? ev.type : '(no type)';
      ve.events.push(type);
      emit('event:in', { t: now(), ev: ev && typeof ev === 'object' ? ev : { type, value: ev } });
      if (type === 'error' && ev.error) showError(`Server error: ${ev.error.message || JSON.stringify(ev.error)}`);
    });
    dc.addEventListener('close', () => {
      if (c === call && !c.ended) note('data channel closed');
    });
  }

  function pollStats(pc, c) {
    let busy = false;
    const tick = async () => {
      if (busy || c.ended) return;
      busy = true;
      try {
        const report = await pc.getStats();
        let inbound = null;
        let outbound = null;
        report.forEach((s) => {
          if (s.type === 'inbound-rtp' && s.kind === 'audio') inbound = s;
          if (s.type === 'outbound-rtp' && s.kind === 'audio') outbound = s;
        });
        const codec = inbound && inbound.codecId ? report.get(inbound.codecId) : null;
        if (codec && codec.mimeType && codec.mimeType !== ve.codec.stats) {
          ve.codec.stats = codec.mimeType;
          renderCodec();
        }
        if (inbound && inbound.packetsReceived > 0 && inbound.totalAudioEnergy > 0) {
          if (ve.timings.firstAudio == null) {
            mark('firstAudio');
            // Found it: slow down to a display refresh.
            clearInterval(c.statsTimer);
            c.statsTimer = setInterval(tick, 500);
          }
        }
        ui.stats.textContent =
          `sent ${outbound ? outbound.packetsSent : 0} packets · ` +
          `received ${inbound ? inbound.packetsReceived || 0 : 0} packets` +
          (inbound && inbound.audioLevel != null ? ` · level ${inbound.audioLevel.toFixed(3)}` : '');
      } catch (_) {
        /* pc closed under us */
      } finally {
        busy = false;
      }
    };
    c.statsTimer = setInterval(tick, 50);
    tick();
  }

  function teardown(c) {
    c.ended = true;
    if (c.statsTimer) clearInterval(c.statsTimer);
    c.statsTimer = null;
    if (ve.dc && c === call) {
      try {
        ve.dc.close();
      } catch (_) {}
    }
    if (ve.pc && c === call) {
      try {
        ve.pc.close();
      } catch (_) {}
    }
    if (c.mic) for (const t of c.mic.getTracks()) t.stop();
    ui.audio.srcObject = null;
  }

  function sendHangup(c, beacon) {
    const url = c.hangupUrl;
    c.hangupUrl = null; // once
    if (!url) return Promise.resolve();
    // A beacon carries no headers: with a pairing key, the keepalive fetch below goes instead.
    if (beacon && navigator.sendBeacon && !pairingKey) {
      navigator.sendBeacon(url);
      return Promise.resolve();
    }
    return fetch(url, { method: 'POST', keepalive: true, headers: withKey() })
      .then(async (res) => {
        const text = await res.text();
        if (c === call) ve.hangup = { status: res.status, ok: res.ok };
        if (!res.ok) note(`hangup: ${res.status} ${errorDetail(text, res)}`);
        else note('hangup sent');
      })
      .catch((e) => {
        if (c === call) ve.hangup = { error: e.message };
        note(`hangup failed: ${e.message}`);
      });
  }

  function endedByServer(c) {
    if (c !== call || c.ended) return;
    note('the server ended the call (DTLS closed)');
    teardown(c);
    setState('ended');
    emit('call:end', { t: now(), state: 'ended' });
  }

  function fail(c, message) {
    if (c !== call || c.ended) return;
    showError(message);
    note('failed', message);
    teardown(c);
    sendHangup(c);
    setState('failed');
    emit('call:end', { t: now(), state: 'failed' });
  }

  async function stop() {
    const c = call;
    if (!c || c.ended) return;
    // Hang up first: once the peer connection closes the server ends the call by itself, and
    // a hangup arriving after that would find no call.
    await sendHangup(c);
    teardown(c);
    setState('ended');
    note('hung up');
    emit('call:end', { t: now(), state: 'ended' });
  }

  /**
   * For tests and the console: hand the panes `ev` as if the server had sent it, to try a pane
   * against events this server build does not produce yet. A note marks it in the inspector;
   * window.voiceEdge.events (what the server really sent) does not list it.
   */
  function injectServerEvent(ev) {
    if (!ev || typeof ev.type !== 'string') throw new Error('injectServerEvent: an object with a string type');
    note(`injected: ${ev.type} (not from the server)`);
    emit('event:in', { t: now(), ev });
  }

  /** Send a client event on the data channel; throws (with a message to show) when it is not open. */
  function send(ev) {
    if (!ve.dc || ve.dc.readyState !== 'open') throw new Error('the data channel is not open: start a call first');
    ve.dc.send(JSON.stringify(ev));
  }

  /**
   * ICE restart, as an app does after a network change (or a blackout/NAT rebind fault): new ICE
   * credentials in a new offer, PATCHed onto the call's Location; the server answers for the same
   * call, session and DTLS. Resolves to {status, ms}; throws with a message to show.
   */
  async function iceRestart() {
    const c = call;
    const pc = ve.pc;
    if (!c || c.ended || !pc) throw new Error('no live call');
    if (!c.callUrl) throw new Error('the call has no Location yet');
    const t0 = performance.now();
    note('ice restart: new offer');
    if (pc.restartIce) pc.restartIce();
    const offer = await pc.createOffer({ iceRestart: true });
    await pc.setLocalDescription(offer);
    let res;
    try {
      res = await fetch(c.callUrl, { method: 'PATCH', headers: withKey({ 'Content-Type': 'application/sdp' }), body: offer.sdp });
    } catch (e) {
      await pc.setLocalDescription({ type: 'rollback' }).catch(() => {});
      throw new Error(`PATCH ${c.callUrl} failed: ${e.message}`);
    }
    const body = await res.text();
    if (!res.ok) {
      await pc.setLocalDescription({ type: 'rollback' }).catch(() => {});
      throw new Error(`PATCH ${c.callUrl} → ${res.status}: ${errorDetail(body, res)}`);
    }
    if (c !== call || c.ended) throw new Error('the call ended during the ICE restart');
    await pc.setRemoteDescription({ type: 'answer', sdp: body });
    const took = Math.round(performance.now() - t0);
    note(`ice restart: answer ${res.status} in ${took} ms`);
    return { status: res.status, ms: took };
  }

  // ---- model picker ------------------------------------------------------

  /** The model to ask for: the picker's value, or script:NAME. Throws with a message to show. */
  function modelValue() {
    const v = ui.model ? ui.model.value : 'echo';
    if (v !== 'script:') return v;
    const name = ui.scriptName ? ui.scriptName.value.trim() : '';
    if (!name) throw new Error('Give the script model a name (script:NAME)');
    return `script:${name}`;
  }
  if (ui.model && ui.scriptName) {
    const showName = () => {
      ui.scriptName.hidden = ui.model.value !== 'script:';
    };
    ui.model.addEventListener('change', showName);
    showName();
  }
  // With --upstream, a real model answers: offered first and chosen by default. The stubs stay.
  ve.upstream = fetch('/demo/config.json')
    .then((r) => (r.ok ? r.json() : {}))
    .then((cfg) => {
      const model = cfg && cfg.upstream_model;
      if (model && ui.model) {
        const opt = document.createElement('option');
        opt.value = model;
        opt.textContent = `${model} (upstream model)`;
        ui.model.prepend(opt);
        ui.model.value = model;
        ui.model.dispatchEvent(new Event('change'));
      }
      return model || null;
    })
    .catch(() => null);

  // Typed text goes the way the Realtime SDK's sendMessage sends it: a user message item, then
  // response.create; the model answers in speech.
  const sayForm = document.getElementById('say');
  const sayText = document.getElementById('text');
  if (sayForm && sayText) {
    sayForm.addEventListener('submit', (e) => {
      e.preventDefault();
      const text = sayText.value.trim();
      if (!text || !ve.dc || ve.dc.readyState !== 'open') return;
      if (ve.api === 'live') {
        // Live has no user text: commentary is context the model says to the caller.
        send({ type: 'session.commentary.append', content: text, delegation_id: null });
      } else {
        send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
        send({ type: 'response.create' });
      }
      sayText.value = '';
    });
    setInterval(() => {
      sayText.disabled = !(ve.dc && ve.dc.readyState === 'open');
    }, 250);
  }

  ui.start.addEventListener('click', () => {
    start();
  });
  ui.stop.addEventListener('click', () => {
    stop();
  });
  window.addEventListener('pagehide', () => {
    if (call && !call.ended) {
      teardown(call);
      sendHangup(call, true);
    }
  });

  // The panes, each given what it needs of the call.
  const ctx = { ve, send, now, note, iceRestart, callUrl: () => (call ? call.callUrl : null) };
  inspector.init(ctx);
  conversation.init(ctx);
  tools.init(ctx);
  netstats.init(ctx);
  faults.init(ctx);
  sideband.init(ctx);

  setState('idle');
  renderSteps();
  renderPath();
  renderCodec();
}
