// Browser entry for live-flow.test.mjs, bundled with esbuild at test time: the `openai` package's own Live
// browser helper (OpenAILiveWebRTC, 'openai/lib/live/webrtc') connecting to voice-edge. The page owns the
// SDP exchange (exchangeSdp posts to /v1/live/sessions, as an app's server would) and the microphone; the
// helper owns the peer connection, the 'oai-events' channel and the typed events. Records into window.rt.
import { OpenAILiveWebRTC } from 'openai/lib/live/webrtc';

const now = () => performance.now();
const rt = (window.rt = { events: [], sent: [], lifecycle: [], pc: null, created: null, conn: null });

window.startLiveSdk = async ({ baseUrl, session }) => {
  const conn = new OpenAILiveWebRTC();
  rt.conn = conn;
  rt.pc = conn.peerConnection;
  conn.onEvent((ev) => rt.events.push({ t: now(), ...ev }));
  conn.onConnectionEvent((ev) => rt.lifecycle.push({ t: now(), type: ev.type, state: ev.state, reason: ev.reason }));
  const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
  conn.peerConnection.addTrack(mic.getTracks()[0]);
  const started = new Promise((resolve) => conn.on('session.started', resolve));
  await conn.connect({
    exchangeSdp: async (offer, { signal }) => {
      const res = await fetch(baseUrl + '/v1/live/sessions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ session, transport: { type: 'webrtc', sdp: offer } }),
        signal,
      });
      const body = await res.json();
      rt.created = { status: res.status, session: body.session };
      if (!res.ok) throw new Error('POST /v1/live/sessions → ' + res.status);
      return body.transport.sdp;
    },
  });
  await started;
  return { state: conn.state, created: rt.created };
};

window.sendEvent = (ev) => {
  rt.conn.send(ev);
  rt.sent.push({ t: now(), ...ev });
};
