// Browser pages for live-flow.test.mjs: OpenAI's Live WebRTC flow against voice-edge.
//
// LIVE_PAGE_HTML is the plain flow of the Live WebRTC guide, no SDK: getUserMedia → RTCPeerConnection with
// the mic track and an 'oai-events' data channel → POST {base}/v1/live/sessions with the session config and
// the offer as JSON → setRemoteDescription(transport.sdp), then wait for session.started before sending
// commands. (On OpenAI the app's server makes that POST with its key; voice-edge lets the page make it.)
//
// live-sdk.page.mjs (bundled at test time) does the same through the package's own browser helper,
// OpenAILiveWebRTC from 'openai/lib/live/webrtc', with an exchangeSdp callback.
//
// Both record into window.rt: events (server events, + t), sent (client events), pc, created (the POST's
// status and body).

export const LIVE_PAGE_SCRIPT = String.raw`
const rt = (window.rt = { events: [], sent: [], pc: null, dc: null, created: null, closed: null });
const now = () => performance.now();

window.startLive = async ({ baseUrl, session }) => {
  const pc = new RTCPeerConnection();
  rt.pc = pc;
  const audio = document.createElement('audio');
  audio.autoplay = true;
  pc.ontrack = (e) => (audio.srcObject = e.streams[0]);
  const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
  pc.addTrack(mic.getTracks()[0]);
  const dc = pc.createDataChannel('oai-events');
  rt.dc = dc;
  const started = new Promise((resolve) => {
    dc.addEventListener('message', (e) => {
      const ev = JSON.parse(e.data);
      rt.events.push({ t: now(), ...ev });
      if (ev.type === 'session.started') resolve(ev);
    });
  });
  dc.addEventListener('close', () => (rt.closed = now()));
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  const res = await fetch(baseUrl + '/v1/live/sessions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ session, transport: { type: 'webrtc', sdp: offer.sdp } }),
  });
  const body = await res.json();
  rt.created = { status: res.status, body: { session: body.session, transportType: body.transport?.type }, location: res.headers.get('Location') };
  if (!res.ok) throw new Error('POST /v1/live/sessions → ' + res.status + ': ' + JSON.stringify(body));
  await pc.setRemoteDescription({ type: 'answer', sdp: body.transport.sdp });
  await started;
  return rt.created;
};

window.sendEvent = (ev) => {
  rt.dc.send(JSON.stringify(ev));
  rt.sent.push({ t: now(), ...ev });
};
`;

export const LIVE_PAGE_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>plain Live WebRTC flow</title></head>
<body><p>plain Live WebRTC flow against voice-edge</p><script>${LIVE_PAGE_SCRIPT}</script></body></html>`;

export const LIVE_SDK_PAGE_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>OpenAILiveWebRTC against voice-edge</title></head>
<body><p>openai/lib/live/webrtc against voice-edge</p><script type="module" src="/sdk.js"></script></body></html>`;
