// The plain browser flow of OpenAI's Realtime WebRTC guide as a page, shared by the Chromium
// (plain-flow.test.mjs) and Firefox (firefox.test.mjs) tests, and the G.711 test (g711.test.mjs). The page
// exposes window.startPlain({baseUrl, key, query, codec}), window.restartIce({baseUrl, location}) and
// window.sendEvent(ev), and records into window.rt. `codec` ('pcmu', 'pcma') limits the offer to that codec
// with RTCRtpTransceiver.setCodecPreferences, as telephony-flavoured pages do.

// The guide's code, nearly verbatim, plus recording into window.rt for the test.
export const PLAIN_PAGE_SCRIPT = String.raw`
const rt = (window.rt = { events: [], sent: [], pc: null, dc: null, calls: null, ontrack: null, error: null });
const now = () => performance.now();

window.startPlain = async ({ baseUrl, key, query = '', codec = null }) => {
  // Create a peer connection
  const pc = new RTCPeerConnection();
  rt.pc = pc;

  // Set up to play remote audio from the model
  const audioElement = document.createElement('audio');
  audioElement.autoplay = true;
  pc.ontrack = (e) => {
    rt.ontrack = { t: now(), streams: e.streams.length, kind: e.track.kind };
    audioElement.srcObject = e.streams[0];
  };

  // Add local audio track for microphone input in the browser
  const ms = await navigator.mediaDevices.getUserMedia({ audio: true });
  pc.addTrack(ms.getTracks()[0]);
  if (codec) {
    const only = RTCRtpReceiver.getCapabilities('audio').codecs.filter((c) => c.mimeType.toLowerCase() === 'audio/' + codec);
    pc.getTransceivers()[0].setCodecPreferences(only);
  }

  // Set up data channel for sending and receiving events
  const dc = pc.createDataChannel('oai-events');
  rt.dc = dc;
  dc.addEventListener('open', () => (rt.dcOpen = now()));
  dc.addEventListener('message', (e) => {
    let ev;
    try {
      ev = JSON.parse(e.data);
    } catch (err) {
      ev = { type: '(unparsable)', data: String(e.data).slice(0, 200), binary: typeof e.data !== 'string' };
    }
    rt.events.push({ t: now(), ...ev, textFrame: typeof e.data === 'string' });
  });

  // Start the session using the Session Description Protocol (SDP)
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);

  const t0 = now();
  const sdpResponse = await fetch(baseUrl + '/v1/realtime/calls' + query, {
    method: 'POST',
    body: offer.sdp,
    headers: {
      Authorization: 'Bearer ' + key,
      'Content-Type': 'application/sdp',
    },
  });
  const body = await sdpResponse.text();
  rt.answerAt = now();
  rt.calls = { ms: now() - t0, status: sdpResponse.status, location: sdpResponse.headers.get('Location'), contentType: sdpResponse.headers.get('Content-Type') };
  if (!sdpResponse.ok) throw new Error('POST /v1/realtime/calls → ' + sdpResponse.status + ': ' + body);
  await pc.setRemoteDescription({ type: 'answer', sdp: body });
  await new Promise((resolve, reject) => {
    if (dc.readyState === 'open') return resolve();
    dc.addEventListener('open', resolve, { once: true });
    dc.addEventListener('close', () => reject(new Error('data channel closed before open')), { once: true });
  });
  return { calls: rt.calls, openMs: now() - t0 };
};

// What a page does when its network changes: restartIce(), a new offer to the call's Location
// (voice-edge's PATCH extension), the answer applied. Records the ICE states it goes through.
window.restartIce = async ({ baseUrl, location }) => {
  const pc = rt.pc;
  rt.iceStates = [];
  pc.addEventListener('iceconnectionstatechange', () => rt.iceStates.push(pc.iceConnectionState));
  const oldUfrag = pc.localDescription.sdp.match(/a=ice-ufrag:(\S+)/)[1];
  pc.restartIce();
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  const res = await fetch(baseUrl + location, { method: 'PATCH', body: offer.sdp, headers: { 'Content-Type': 'application/sdp' } });
  const body = await res.text();
  if (!res.ok) throw new Error('PATCH ' + location + ' → ' + res.status + ': ' + body);
  await pc.setRemoteDescription({ type: 'answer', sdp: body });
  const newUfrag = pc.localDescription.sdp.match(/a=ice-ufrag:(\S+)/)[1];
  return { status: res.status, oldUfrag, newUfrag };
};

window.sendEvent = (ev) => {
  rt.dc.send(JSON.stringify(ev));
  rt.sent.push({ t: now(), ...ev });
};
`;

export const PLAIN_PAGE_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>plain Realtime WebRTC flow</title></head>
<body><p>plain WebRTC flow against voice-edge</p><script>${PLAIN_PAGE_SCRIPT}</script></body></html>`;
