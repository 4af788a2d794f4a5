// voice-edge demo: the OpenAI Realtime WebRTC browser flow against this server.
// Plain JS, no build step. State for tests lives in window.voiceEdge.
'use strict';

(function () {
  const CALLS_URL = '/v1/realtime/calls';
  const STEPS = ['offerPosted', 'answerReceived', 'iceConnected', 'dtlsConnected', 'dataChannelOpen', 'firstAudio'];
  const MAX_LOG = 200;

  const $ = (sel) => document.querySelector(sel);
  const ui = {
    start: $('#start'),
    stop: $('#stop'),
    state: $('#state'),
    error: $('#error'),
    events: $('#events'),
    audio: $('#remote'),
    stats: $('#audio-stats'),
  };

  // Exposed for tests and for poking around in the console.
  const ve = (window.voiceEdge = {
    state: 'idle',
    timings: emptyTimings(),
    path: emptyPath(),
    events: [],
    error: null,
    hangup: null, // {status, ok} or {error} once the hangup POST finished
    pc: null,
    dc: null,
  });

  let call = null; // per-call private bits: {t0, mic, statsTimer, hangupUrl, ended}

  function emptyTimings() {
    const t = {};
    for (const s of STEPS) t[s] = null;
    return t;
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

  function renderPath() {
    for (const [k, v] of Object.entries(ve.path)) {
      const el = document.querySelector(`[data-path="${k}"]`);
      if (el) el.textContent = v == null || v === '' ? '–' : v;
    }
  }

  function logEvent(type, detail, dir) {
    const li = document.createElement('li');
    const t = call ? `${Math.round(performance.now() - call.t0)} ms` : '';
    li.className = dir || 'in';
    li.innerHTML = '<span class="t"></span><span class="dir"></span><span class="type"></span>';
    li.querySelector('.t').textContent = t;
    li.querySelector('.dir').textContent = dir === 'out' ? '→' : dir === 'note' ? '·' : '←';
    li.querySelector('.type').textContent = type;
    if (detail) li.title = detail;
    ui.events.appendChild(li);
    while (ui.events.children.length > MAX_LOG) ui.events.firstChild.remove();
    ui.events.scrollTop = ui.events.scrollHeight;
  }

  function mark(step) {
    if (!call || ve.timings[step] != null) return;
    ve.timings[step] = Math.round((performance.now() - call.t0) * 10) / 10;
    renderSteps();
  }

  // ---- the call --------------------------------------------------------

  async function start() {
    if (call && !call.ended) return;
    ui.events.textContent = '';
    ve.timings = emptyTimings();
    ve.path = emptyPath();
    ve.events = [];
    ve.pc = null;
    ve.dc = null;
    ve.hangup = null;
    showError(null);
    renderSteps();
    renderPath();
    ui.stats.textContent = 'no audio yet';
    setState('connecting');

    const c = (call = { t0: performance.now(), mic: null, statsTimer: null, hangupUrl: null, ended: false });

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
        if (p && p.catch) p.catch((err) => logEvent(`audio play blocked: ${err.name}`, err.message, 'note'));
      };

      const track = c.mic.getAudioTracks()[0];
      pc.addTrack(track);

      const dc = pc.createDataChannel('oai-events');
      ve.dc = dc;
      watchChannel(dc, c);

      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      watchDtls(pc, c);

      mark('offerPosted');
      let res;
      try {
        const model = document.getElementById('model');
        res = await fetch(`${CALLS_URL}?model=${encodeURIComponent(model ? model.value : 'echo')}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/sdp' },
          body: offer.sdp,
        });
      } catch (e) {
        throw new Error(`POST ${CALLS_URL} failed: ${e.message}`);
      }
      const body = await res.text();
      if (!res.ok) throw new Error(`Call request failed with status ${res.status}: ${errorDetail(body, res)}`);
      if (c.ended) return;
      mark('answerReceived');

      const location = res.headers.get('Location');
      if (location) {
        c.hangupUrl = new URL(location, window.location.href).pathname.replace(/\/$/, '') + '/hangup';
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
      if (!c.hangupUrl && ve.path.callId) c.hangupUrl = `${CALLS_URL}/${encodeURIComponent(ve.path.callId)}/hangup`;
      renderPath();

      await pc.setRemoteDescription({ type: 'answer', sdp: body });
      watchDtls(pc, c); // the transport exists by now in every browser
      pollStats(pc, c);
    } catch (e) {
      fail(c, e && e.message ? e.message : String(e));
    }
  }

  function errorDetail(body, res) {
    try {
      const j = JSON.parse(body);
      if (j && j.error && j.error.message) return j.error.message;
    } catch (_) {
      /* not JSON */
    }
    return body.trim() || res.statusText || 'no detail';
  }

  function watchPeer(pc, c) {
    pc.addEventListener('iceconnectionstatechange', () => {
      if (c !== call) return;
      const s = pc.iceConnectionState;
      logEvent(`ice ${s}`, null, 'note');
      if (s === 'connected' || s === 'completed') mark('iceConnected');
      if (s === 'failed') fail(c, iceFailure());
    });
    pc.addEventListener('connectionstatechange', () => {
      if (c !== call) return;
      const s = pc.connectionState;
      logEvent(`peer ${s}`, null, 'note');
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
    const check = () => {
      if (c !== call) return;
      if (t.state === 'connected') mark('dtlsConnected');
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
      const update = {
        type: 'session.update',
        session: {
          type: 'realtime',
          model: (document.getElementById('model') || { value: 'echo' }).value,
          output_modalities: ['audio'],
        },
      };
      dc.send(JSON.stringify(update));
      logEvent('session.update', JSON.stringify(update), 'out');
    });
    dc.addEventListener('message', (e) => {
      if (c !== call) return;
      let ev;
      try {
        ev = JSON.parse(typeof e.data === 'string' ? e.data : '');
      } catch (_) {
        logEvent('(unparseable message)', String(e.data), 'note');
        return;
      }
      const type = ev && typeof ev.type === 'string' ? ev.type : '(no type)';
      ve.events.push(type);
      logEvent(type, JSON.stringify(ev, null, 2));
      if (type === 'error' && ev.error) showError(`Server error: ${ev.error.message || JSON.stringify(ev.error)}`);
    });
    dc.addEventListener('close', () => {
      if (c === call && !c.ended) logEvent('data channel closed', null, 'note');
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
    if (beacon && navigator.sendBeacon) {
      navigator.sendBeacon(url);
      return Promise.resolve();
    }
    return fetch(url, { method: 'POST', keepalive: true })
      .then(async (res) => {
        const text = await res.text();
        if (c === call) ve.hangup = { status: res.status, ok: res.ok };
        if (!res.ok) logEvent(`hangup: ${res.status} ${errorDetail(text, res)}`, null, 'note');
        else logEvent('hangup sent', null, 'note');
      })
      .catch((e) => {
        if (c === call) ve.hangup = { error: e.message };
        logEvent(`hangup failed: ${e.message}`, null, 'note');
      });
  }

  function fail(c, message) {
    if (c !== call || c.ended) return;
    showError(message);
    logEvent('failed', message, 'note');
    teardown(c);
    sendHangup(c);
    setState('failed');
  }

  async function stop() {
    const c = call;
    if (!c || c.ended) return;
    // Hang up first: once the peer connection closes the server ends the call by itself, and
    // a hangup arriving after that would find no call.
    await sendHangup(c);
    teardown(c);
    setState('ended');
    logEvent('hung up', null, 'note');
  }

  // Typed text goes the way the Realtime SDK's sendMessage sends it: a user message item, then
  // response.create; the model answers in speech.
  const sayForm = document.getElementById('say');
  const sayText = document.getElementById('text');
  if (sayForm && sayText) {
    sayForm.addEventListener('submit', (e) => {
      e.preventDefault();
      const text = sayText.value.trim();
      if (!text || !ve.dc || ve.dc.readyState !== 'open') return;
      const send = (ev) => {
        ve.dc.send(JSON.stringify(ev));
        logEvent(ev.type, JSON.stringify(ev), 'out');
      };
      send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
      send({ type: 'response.create' });
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

  setState('idle');
  renderSteps();
  renderPath();
})();
