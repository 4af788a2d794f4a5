// Drives the browsers for capture.sh: one voice-edge (UDP links, so relay↔transceiver datagrams
// cross loopback; the fuzz targets' route key 0, so the ufrags browsers echo decode in the fuzz
// harness), then in headless Chromium and Firefox an offer as the demo page makes it, a call, an
// ICE restart on it, and in Chromium the official @openai/agents-realtime SDK. Writes
// <out>/results.json (the offers, the SDK's client events) and <out>/ports.json.
//
//   node fuzz/seeds/capture.mjs <out-dir>      (capture.sh runs it with the sniffer)
import dgram from 'node:dgram';
import fs from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, launchBrowser, openPage, primaryIPv4, startServer } from '../../tests/e2e/harness.mjs';
import { launchFirefox, openFirefoxPage } from '../../tests/e2e/firefox.mjs';
import { bundleBrowserEntry, sleep, startStaticServer, waitForEvent } from '../../tests/e2e/realtime-util.mjs';

const out = process.argv[2];
if (!out) throw new Error('usage: node fuzz/seeds/capture.mjs <out-dir>');

// src/fuzzing/route.rs: the relay's previous key, id 0 (the id the all-in-one mints with).
const routeSecret = Buffer.from('fuzz-previous-secret-0123456789a').toString('hex');
const ip = primaryIPv4();

// A STUN server that never answers: browsers still send it their server-reflexive binding
// requests, the kind without USERNAME.
const stunSock = dgram.createSocket('udp4');
await new Promise((r) => stunSock.bind(0, ip, r));
const stun = `${ip}:${stunSock.address().port}`;

const server = await startServer({
  extraArgs: ['--route-secret', routeSecret, '--udp-links', '--transceivers', '1', '--transceiver-workers', '1'],
});
const pages = await startStaticServer({
  '/': { type: 'text/html; charset=utf-8', body: '<!doctype html><title>seeds</title>' },
  '/sdk': { type: 'text/html; charset=utf-8', body: '<!doctype html><script type="module" src="/sdk.js"></script>' },
  '/sdk.js': { type: 'text/javascript; charset=utf-8', body: await bundleBrowserEntry('realtime-sdk.page.mjs') },
});
const callsUrl = new URL('/v1/realtime/calls', server.baseUrl).href;

// Runs in the page. The offer is posted before gathering, as the demo and the SDK do; the
// gathered one (with candidates) and the ICE-restart one are kept too.
async function offersFlow({ callsUrl, stunUrl }) {
  const r = {};
  const wait = (ms) => new Promise((done) => setTimeout(done, ms));
  const pc = new RTCPeerConnection({ iceServers: [{ urls: stunUrl }] });
  const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
  for (const t of mic.getTracks()) pc.addTrack(t, mic);
  const dc = pc.createDataChannel('oai-events');
  const offer = await pc.createOffer();
  r.initial = offer.sdp;
  await pc.setLocalDescription(offer);
  await Promise.race([
    new Promise((done) => (pc.onicegatheringstatechange = () => pc.iceGatheringState === 'complete' && done())),
    wait(6000),
  ]);
  r.gathered = pc.localDescription.sdp;
  const res = await fetch(callsUrl, { method: 'POST', headers: { 'content-type': 'application/sdp' }, body: r.initial });
  r.status = res.status;
  const call = new URL(res.headers.get('location'), callsUrl).href;
  await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
  await Promise.race([new Promise((done) => (dc.onopen = done)), wait(8000)]);
  r.channel = dc.readyState;
  if (dc.readyState === 'open') {
    dc.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
    dc.send(JSON.stringify({ type: 'response.create', response: { instructions: 'Say hi.' } }));
  }
  await wait(1500);
  const restart = await pc.createOffer({ iceRestart: true });
  r.restart = restart.sdp;
  await pc.setLocalDescription(restart);
  const res2 = await fetch(call, { method: 'PATCH', headers: { 'content-type': 'application/sdp' }, body: restart.sdp });
  r.restartStatus = res2.status;
  if (res2.ok) await pc.setRemoteDescription({ type: 'answer', sdp: await res2.text() });
  await wait(2000);
  r.state = pc.connectionState;
  pc.close();
  return r;
}

const results = {};
const args = { callsUrl, stunUrl: `stun:${stun}` };
const report = (name, r) => console.log(`${name}: POST ${r.status}, channel ${r.channel}, PATCH ${r.restartStatus}, ${r.state}`);

const chromium = await launchBrowser({ audioFile: path.join(REPO_ROOT, 'fixtures', 'turn.wav') });
try {
  const { page } = await openPage(chromium, `${pages.origin}/`);
  results.chromium = await page.evaluate(offersFlow, args);
  report('chromium', results.chromium);

  // The SDK records every client event it writes (realtime-sdk.page.mjs): a spoken turn
  // (turn.wav), a text message, an interrupt while it is answered, another message.
  const { page: sdk } = await openPage(chromium, `${pages.origin}/sdk`);
  await sdk.waitForFunction(() => window.rtReady === true, null, { timeout: 10_000 });
  await sdk.evaluate((o) => window.startSession(o), { baseUrl: callsUrl, apiKey: 'ek_test', model: 'echo' });
  await waitForEvent(sdk, { type: 'response.done' }, { timeoutMs: 15_000 });
  await sdk.evaluate(() => window.rt.session.mute(true));
  await sdk.evaluate(() => window.rt.session.sendMessage('Testing the text path.'));
  await sleep(800);
  await sdk.evaluate(() => window.rt.session.interrupt());
  await sleep(500);
  await sdk.evaluate(() => window.rt.session.sendMessage('And a second message, left to finish.'));
  await sleep(4000);
  results.sdk = await sdk.evaluate(() => ({
    sent: window.rt.sent.map(({ t, ...event }) => event),
    local: window.rt.pc.localDescription.sdp,
  }));
  await sdk.evaluate(() => window.rt.session.close());
  console.log(`sdk: sent ${results.sdk.sent.map((e) => e.type).join(', ')}`);
} finally {
  await chromium.close();
}

const firefox = await launchFirefox();
try {
  const { page } = await openFirefoxPage(firefox, `${pages.origin}/`);
  results.firefox = await page.evaluate(offersFlow, args);
  report('firefox', results.firefox);
} finally {
  await firefox.close();
}

fs.writeFileSync(path.join(out, 'results.json'), JSON.stringify(results, null, 1));
fs.writeFileSync(path.join(out, 'ports.json'), JSON.stringify({ relay: server.relayAddr, stun }));
await pages.close();
await server.stop();
stunSock.close();
