// Network: pc.getStats() once a second while a call is live.
//   RTT          the selected candidate pair's currentRoundTripTime (ICE consent checks); if the
//                browser has none yet, remote-inbound-rtp roundTripTime (RTCP), labelled so
//   jitter       inbound-rtp audio jitter (what the browser measures on the audio it receives)
//   lost / recv  inbound-rtp audio packetsLost / packetsReceived
//   out / in     audio RTP bitrate over the last second (bytesSent / bytesReceived deltas)
// Turn latency: from input_audio_buffer.speech_stopped to output_audio_buffer.started (or the first
// response.output_audio_transcript.delta when no started arrives), per turn; last and median. Both
// are server events, so this is the edge's + model's reaction time as the page sees it. A turn with
// no speech_stopped (a typed message, or push-to-talk's commit) counts from the response.create
// the page sent instead.
// window.voiceEdge.net = the last sample; window.voiceEdge.turns = [{t, latencyMs, from, via}].
import { $, el, median, ms, on } from '../lib.js';

export function init({ ve, note }) {
  const out = {
    rtt: $('#net-rtt'),
    jitter: $('#net-jitter'),
    lost: $('#net-lost'),
    recv: $('#net-recv'),
    outKbps: $('#net-out'),
    inKbps: $('#net-in'),
    status: $('#net-status'),
    last: $('#latency-last'),
    median: $('#latency-median'),
    turns: $('#latency-turns'),
  };
  let timer = null;
  let prev = null; // {at, bytesSent, bytesReceived}
  let stopped = null; // t of the speech_stopped (or response.create) awaiting its reply
  let from = null; // which of the two
  let lastError = null;

  function show(k, text) {
    out[k].textContent = text;
  }

  function reset() {
    if (timer) clearInterval(timer);
    timer = null;
    prev = null;
    stopped = null;
    provisional = null;
    lastError = null;
    ve.net = null;
    ve.turns = [];
    for (const k of ['rtt', 'jitter', 'lost', 'recv', 'outKbps', 'inKbps', 'last', 'median']) show(k, '–');
    out.turns.textContent = '';
    show('status', 'sampled every second during a call');
  }

  async function sample() {
    const pc = ve.pc;
    if (!pc || pc.connectionState === 'closed') return;
    let report;
    try {
      report = await pc.getStats();
    } catch (e) {
      if (lastError !== e.message) note(`getStats failed: ${e.message}`);
      lastError = e.message;
      show('status', `getStats failed: ${e.message}`);
      return;
    }
    const byId = new Map();
    let inbound = null;
    let outbound = null;
    let remoteInbound = null;
    let transport = null;
    const pairs = [];
    report.forEach((s) => {
      byId.set(s.id, s);
      if (s.type === 'inbound-rtp' && s.kind === 'audio') inbound = s;
      else if (s.type === 'outbound-rtp' && s.kind === 'audio') outbound = s;
      else if (s.type === 'remote-inbound-rtp' && s.kind === 'audio') remoteInbound = s;
      else if (s.type === 'transport') transport = s;
      else if (s.type === 'candidate-pair') pairs.push(s);
    });
    // The selected pair: the transport names it (Chromium, Firefox); else `selected` (older
    // Firefox) or the nominated, succeeded one.
    let pair = transport && transport.selectedCandidatePairId ? byId.get(transport.selectedCandidatePairId) : null;
    pair ||= pairs.find((p) => p.selected) || pairs.find((p) => p.nominated && p.state === 'succeeded') || null;

    const at = performance.now();
    const net = {
      rttMs: null,
      rttSource: null,
      jitterMs: inbound && typeof inbound.jitter === 'number' ? inbound.jitter * 1000 : null,
      packetsLost: inbound && typeof inbound.packetsLost === 'number' ? inbound.packetsLost : null,
      packetsReceived: inbound ? inbound.packetsReceived ?? 0 : null,
      outKbps: null,
      inKbps: null,
    };
    if (pair && typeof pair.currentRoundTripTime === 'number') {
      net.rttMs = pair.currentRoundTripTime * 1000;
      net.rttSource = 'ICE';
    } else if (pair && pair.totalRoundTripTime > 0 && pair.responsesReceived > 0) {
      net.rttMs = (pair.totalRoundTripTime / pair.responsesReceived) * 1000;
      net.rttSource = 'ICE avg';
    } else if (remoteInbound && typeof remoteInbound.roundTripTime === 'number') {
      net.rttMs = remoteInbound.roundTripTime * 1000;
      net.rttSource = 'RTCP';
    }
    const cur = { at, bytesSent: outbound ? outbound.bytesSent || 0 : 0, bytesReceived: inbound ? inbound.bytesReceived || 0 : 0 };
    if (prev && at > prev.at) {
      const secs = (at - prev.at) / 1000;
      net.outKbps = ((cur.bytesSent - prev.bytesSent) * 8) / 1000 / secs;
      net.inKbps = ((cur.bytesReceived - prev.bytesReceived) * 8) / 1000 / secs;
    }
    prev = cur;
    ve.net = net;

    show('rtt', net.rttMs == null ? '–' : `${ms(net.rttMs)}${net.rttSource === 'ICE' ? '' : ` (${net.rttSource})`}`);
    show('jitter', ms(net.jitterMs));
    show('lost', net.packetsLost == null ? '–' : String(net.packetsLost));
    show('recv', net.packetsReceived == null ? '–' : String(net.packetsReceived));
    show('outKbps', net.outKbps == null ? '–' : `${net.outKbps.toFixed(1)} kbit/s`);
    show('inKbps', net.inKbps == null ? '–' : `${net.inKbps.toFixed(1)} kbit/s`);
    const lossPct = net.packetsReceived + net.packetsLost > 0 ? (100 * net.packetsLost) / (net.packetsReceived + net.packetsLost) : null;
    show('status', lossPct == null ? `updated at ${Math.round(at / 1000)} s` : `loss so far ${lossPct.toFixed(2)} %`);
  }

  // The transcript delta stands in for a missing output_audio_buffer.started; if the started event
  // comes after all (same turn, no newer speech_stopped), it replaces the stand-in.
  let provisional = null; // {turn, stoppedAt, li}

  function turnDone(t, via) {
    if (stopped == null) {
      if (via === 'output_audio_buffer.started' && provisional) {
        const { turn, stoppedAt, li } = provisional;
        provisional = null;
        turn.latencyMs = Math.round((t - stoppedAt) * 10) / 10;
        turn.via = via;
        li.textContent = `${Math.round(turn.latencyMs)}`;
        li.title = `${turn.from} → ${via}`;
        renderLatency();
      }
      return;
    }
    const stoppedAt = stopped;
    stopped = null;
    const turn = { t, latencyMs: Math.round((t - stoppedAt) * 10) / 10, from, via };
    ve.turns.push(turn);
    const li = el('li', { title: `${from} → ${via}` }, `${Math.round(turn.latencyMs)}`);
    out.turns.appendChild(li);
    while (out.turns.children.length > 20) out.turns.firstChild.remove();
    provisional = via === 'output_audio_buffer.started' ? null : { turn, stoppedAt, li };
    renderLatency();
  }

  function renderLatency() {
    const last = ve.turns[ve.turns.length - 1];
    show('last', last ? ms(last.latencyMs, 0) : '–');
    show('median', ms(median(ve.turns.map((x) => x.latencyMs)), 0));
  }

  on('call:start', reset);
  on('channel:open', () => {
    if (timer) clearInterval(timer);
    timer = setInterval(sample, 1000);
    sample();
  });
  on('call:end', () => {
    if (timer) clearInterval(timer);
    timer = null;
  });
  on('event:out', ({ t, ev }) => {
    if (ev.type === 'response.create' && stopped == null) {
      stopped = t;
      from = 'response.create';
      provisional = null;
    }
  });
  on('event:in', ({ t, ev }) => {
    if (ev.type === 'input_audio_buffer.speech_stopped') {
      stopped = t;
      from = 'speech_stopped';
      provisional = null;
    }
    else if (ev.type === 'output_audio_buffer.started') turnDone(t, 'output_audio_buffer.started');
    else if (ev.type === 'response.output_audio_transcript.delta') turnDone(t, 'first transcript delta');
    // A response.create answered without audio (text only, a tool call, refused) is no turn to time.
    else if (ev.type === 'response.done' && from === 'response.create') stopped = null;
  });

  reset();
}
