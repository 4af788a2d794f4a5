#!/usr/bin/env node
// Connect-time comparison driver: one headless Chromium places N calls at each target (interleaved round-robin,
// the starting target rotating every round), timing each setup step in the page with performance.now(),
// and prints markdown tables (summary, ratios, raw runs) plus a JSON dump of every call.
//
//   node bench/connect/connect.mjs --target aiortc=http://127.0.0.1:8090 \
//        --target relay=http://127.0.0.1:8091 --target direct=http://127.0.0.1:8092 [--runs 10] [--warmup 1]
//
// A target is a base URL that answers POST /v1/realtime/calls?model=echo (Content-Type: application/sdp)
// with 201 + an SDP answer. The page is served from its own loopback origin, so every target sees the same
// cross-origin request (CORS preflight included). Per call the page uses a new RTCPeerConnection with the
// (shared) fake-mic track and a data channel 'oai-events', posts the offer as created (no waiting for ICE
// gathering, as in OpenAI's Realtime WebRTC guide and the demo page), and records, from `offer posted`:
// answer received, ICE connected (iceConnectionState connected|completed), connected (connectionState
// 'connected', i.e. DTLS done), data channel open. Then it hangs up ({Location}/hangup) and closes the pc.
// Chromium's fake mic is opened once up front (getUserMedia costs ~100-200 ms that are no one's fault).
//
// Every call is bounded by --call-timeout-ms; a failed call is recorded (and counted) and the run goes on.
// It never starts servers: bench/connect/run.sh does that.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
const E2E = path.resolve(here, '..', '..', 'tests', 'e2e');
const { launchBrowser, openPage, fmt, SPEECH_WAV } = await import(path.join(E2E, 'harness.mjs'));
const { startStaticServer } = await import(path.join(E2E, 'realtime-util.mjs'));

const { values } = parseArgs({
  options: {
    target: { type: 'string', multiple: true, default: [] },
    runs: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '1' },
    'call-timeout-ms': { type: 'string', default: '15000' },
    'gap-ms': { type: 'string', default: '300' },
    json: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help || values.target.length === 0) {
  console.log('usage: node bench/connect/connect.mjs --target NAME=URL [--target NAME=URL ...] [--runs 10] [--warmup 1] ' +
    '[--call-timeout-ms 15000] [--gap-ms 300] [--json out.json]');
  process.exit(values.help ? 0 : 2);
}
const runs = Number.parseInt(values.runs, 10);
const warmup = Number.parseInt(values.warmup, 10);
const callTimeoutMs = Number.parseInt(values['call-timeout-ms'], 10);
const gapMs = Number.parseInt(values['gap-ms'], 10);
if (!(runs > 0 && runs <= 1000) || !(warmup >= 0 && warmup <= 100) || !(callTimeoutMs > 0) || !(gapMs >= 0)) {
  console.error('--runs must be 1..1000, --warmup 0..100, --call-timeout-ms > 0, --gap-ms >= 0');
  process.exit(2);
}
const targets = values.target.map((t) => {
  const i = t.indexOf('=');
  if (i <= 0) throw new Error(`--target wants NAME=URL, got ${t}`);
  const url = new URL(t.slice(i + 1));
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) throw new Error(`loopback targets only: ${t}`);
  return { name: t.slice(0, i), base: url.origin };
});

// The page: one function per call, everything timed from just before the POST.
const PAGE_SCRIPT = String.raw`
const now = () => performance.now();
let mic = null;
window.openMic = async () => {
  if (!mic) mic = await navigator.mediaDevices.getUserMedia({ audio: true });
  return mic.getAudioTracks().length;
};
window.placeCall = async ({ base, timeoutMs }) => {
  const r = { t: {}, events: [], error: null };
  const pc = new RTCPeerConnection();
  window.currentPc = pc;
  let t0 = null;
  const mark = (k) => { if (t0 != null && r.t[k] == null) r.t[k] = now() - t0; };
  let done;
  const finished = new Promise((res) => (done = res));
  const check = () => { if (r.t.connected != null && r.t.dcOpen != null) done(); };
  pc.addEventListener('iceconnectionstatechange', () => {
    const s = pc.iceConnectionState;
    if (t0 != null) r.events.push([Math.round((now() - t0) * 10) / 10, 'ice', s]);
    if (s === 'connected' || s === 'completed') mark('iceConnected');
    if (s === 'failed') { r.error = r.error || 'ICE failed'; done(); }
  });
  pc.addEventListener('connectionstatechange', () => {
    const s = pc.connectionState;
    if (t0 != null) r.events.push([Math.round((now() - t0) * 10) / 10, 'pc', s]);
    if (s === 'connected') { mark('connected'); check(); }
    if (s === 'failed') { r.error = r.error || 'connection failed'; done(); }
  });
  pc.addTrack(mic.getAudioTracks()[0], mic);
  const dc = pc.createDataChannel('oai-events');
  dc.addEventListener('open', () => { mark('dcOpen'); check(); });
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  let hangupUrl = null;
  try {
    t0 = now();
    const res = await fetch(base + '/v1/realtime/calls?model=echo', {
      method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: offer.sdp,
    });
    const body = await res.text();
    mark('answerReceived');
    r.status = res.status;
    r.media = res.headers.get('x-voice-edge-media');
    const loc = res.headers.get('Location');
    if (loc) hangupUrl = new URL(loc, base + '/').href.replace(/\/$/, '') + '/hangup';
    if (!res.ok) throw new Error('POST → ' + res.status + ': ' + body.slice(0, 200));
    r.answerSdp = body;
    r.answerSetup = (body.match(/a=setup:(\w+)/) || [])[1] || null;
    r.answerCandidates = (body.match(/a=candidate:[^\r\n]*/g) || []).map((c) => c.split(' ').slice(4, 6).join(':'));
    r.answerIceLite = /a=ice-lite/.test(body);
    await pc.setRemoteDescription({ type: 'answer', sdp: body });
    mark('remoteSet');
    const timer = setTimeout(() => { r.error = r.error || 'timeout after ' + timeoutMs + ' ms'; done(); }, timeoutMs);
    await finished;
    clearTimeout(timer);
    try {
      const stats = await pc.getStats();
      const byId = new Map();
      stats.forEach((s) => byId.set(s.id, s));
      stats.forEach((s) => {
        if (s.type !== 'transport') return;
        r.dtlsRole = s.dtlsRole ?? null; // Chromium's own role: 'client' sends the ClientHello
        r.tlsVersion = s.tlsVersion ?? null;
        r.srtpCipher = s.srtpCipher ?? null;
        const pair = byId.get(s.selectedCandidatePairId);
        const rc = pair && byId.get(pair.remoteCandidateId);
        const lc = pair && byId.get(pair.localCandidateId);
        if (rc) r.remote = rc.address + ':' + rc.port + ' ' + rc.candidateType;
        if (lc) r.local = lc.address + ':' + lc.port + ' ' + lc.candidateType;
        if (pair) r.stunRequestsSent = pair.requestsSent;
      });
    } catch (e) { r.statsError = String(e); }
  } catch (e) {
    r.error = r.error || String(e && e.message ? e.message : e);
  } finally {
    if (hangupUrl) {
      try { await fetch(hangupUrl, { method: 'POST' }); } catch (_) {}
    }
    try { dc.close(); } catch (_) {}
    pc.close();
    window.currentPc = null;
  }
  return r;
};
`;
const HTML = `<!doctype html><html><head><meta charset="utf-8"><title>connect bench</title></head>
<body><p>connect-time bench</p><script>${PAGE_SCRIPT}</script></body></html>`;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function quantile(xs, q) {
  const v = xs.filter((x) => typeof x === 'number').sort((a, b) => a - b);
  if (v.length === 0) return null;
  if (q === 0.5) {
    const m = v.length >> 1;
    return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  }
  return v[Math.min(v.length - 1, Math.ceil(q * v.length) - 1)]; // nearest rank
}
const diff = (t, a, b) => (typeof t[a] === 'number' && typeof t[b] === 'number' ? t[b] - t[a] : null);
const METRICS = [
  ['offer→answer', (t) => t.answerReceived],
  ['answer→ICE connected', (t) => diff(t, 'answerReceived', 'iceConnected')],
  ['ICE→connected (DTLS)', (t) => diff(t, 'iceConnected', 'connected')],
  ['**answer→connected**', (t) => diff(t, 'answerReceived', 'connected')],
  ['answer→dc open', (t) => diff(t, 'answerReceived', 'dcOpen')],
  ['offer→connected', (t) => t.connected],
];

let statics = null;
let browser = null;
let exitCode = 0;
const started = Date.now();
try {
  statics = await startStaticServer({ '/': { type: 'text/html; charset=utf-8', body: HTML } });
  browser = await launchBrowser({ audioFile: SPEECH_WAV });
  const { context, page, consoleLines } = await openPage(browser, statics.origin + '/');
  await page.evaluate(() => window.openMic());

  const results = Object.fromEntries(targets.map((t) => [t.name, []]));
  const failures = Object.fromEntries(targets.map((t) => [t.name, 0]));
  for (let round = -warmup; round < runs; round++) {
    const k = ((round % targets.length) + targets.length) % targets.length;
    const order = [...targets.slice(k), ...targets.slice(0, k)];
    for (const tgt of order) {
      const label = round < 0 ? `warm-up ${round + warmup + 1}/${warmup}` : `run ${round + 1}/${runs}`;
      const r = await Promise.race([
        page.evaluate((a) => window.placeCall(a), { base: tgt.base, timeoutMs: callTimeoutMs }),
        sleep(callTimeoutMs + 10_000).then(() => ({ t: {}, error: 'page did not return' })),
      ]);
      r.target = tgt.name;
      r.round = round + 1;
      const t = r.t;
      process.stderr.write(
        `${label} ${tgt.name.padEnd(7)} answer ${fmt(t.answerReceived)} ice +${fmt(diff(t, 'answerReceived', 'iceConnected'))} ` +
          `connected +${fmt(diff(t, 'answerReceived', 'connected'))} dc +${fmt(diff(t, 'answerReceived', 'dcOpen'))} ms` +
          ` (answer setup:${r.answerSetup}, chromium dtls ${r.dtlsRole}, remote ${r.remote})` +
          (r.error ? ` ERROR ${r.error}` : '') + '\n',
      );
      if (round >= 0) {
        if (r.error) failures[tgt.name]++;
        results[tgt.name].push(r);
      }
      await sleep(gapMs);
    }
  }

  // Summary table.
  const ok = (name) => results[name].filter((r) => !r.error);
  const med = (name, f) => quantile(ok(name).map((r) => f(r.t)), 0.5);
  const base0 = targets.find((t) => t.name === 'aiortc') ? 'aiortc' : targets[0].name;
  const cpus = (await import('node:os')).cpus();
  console.log(`## Connect times, ms (headless Chromium ${browser.version()}, ${runs} calls per target after ${warmup} warm-up round(s), ` +
    `interleaved; ${cpus.length} CPU(s) ${cpus[0]?.model ?? ''}; ${new Date().toISOString()})`);
  console.log('');
  const head = ['target', 'ok/runs', 'answer (a=setup, ice-lite?)', 'Chromium DTLS role', ...METRICS.map(([m]) => `${m} p50 / p90`), `answer→connected p50 ÷ ${base0}`];
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map(() => '---').join('|')}|`);
  for (const { name } of targets) {
    const rs = ok(name);
    const uniq = (f) => [...new Set(rs.map(f))].join(',') || '-';
    const cells = METRICS.map(([, f]) => `${fmt(quantile(rs.map((r) => f(r.t)), 0.5))} / ${fmt(quantile(rs.map((r) => f(r.t)), 0.9))}`);
    const ratio = med(name, METRICS[3][1]) / med(base0, METRICS[3][1]);
    console.log(`| ${name} | ${rs.length}/${results[name].length} | ${uniq((r) => r.answerSetup + (r.answerIceLite ? ' ice-lite' : ''))} | ${uniq((r) => r.dtlsRole)} | ${cells.join(' | ')} | ${Number.isFinite(ratio) ? ratio.toFixed(2) : '-'} |`);
  }
  // Ratios of medians.
  const names = targets.map((t) => t.name);
  const pairs = names.filter((n) => n !== base0).map((n) => [n, base0]);
  if (names.includes('relay') && names.includes('direct')) pairs.push(['relay', 'direct']);
  if (pairs.length) {
    console.log('');
    console.log('Ratios of medians:');
    console.log('');
    const rh = ['metric', ...pairs.map(([a, b]) => `${a} ÷ ${b}`)];
    console.log(`| ${rh.join(' | ')} |`);
    console.log(`|${rh.map(() => '---').join('|')}|`);
    for (const [m, f] of METRICS) {
      const cells = pairs.map(([a, b]) => {
        const x = med(a, f) / med(b, f);
        return Number.isFinite(x) ? x.toFixed(2) : '-';
      });
      console.log(`| ${m} | ${cells.join(' | ')} |`);
    }
  }
  // Raw runs.
  console.log('');
  console.log('Raw runs (ms from offer posted):');
  console.log('');
  const rawHead = ['target', 'run', 'answer', 'ICE connected', 'connected', 'dc open', 'answer→connected', 'remote (Chromium\'s view)', 'error'];
  console.log(`| ${rawHead.join(' | ')} |`);
  console.log(`|${rawHead.map(() => '---').join('|')}|`);
  for (const { name } of targets) {
    for (const r of results[name]) {
      const t = r.t;
      console.log(`| ${name} | ${r.round} | ${fmt(t.answerReceived)} | ${fmt(t.iceConnected)} | ${fmt(t.connected)} | ${fmt(t.dcOpen)} | ` +
        `${fmt(diff(t, 'answerReceived', 'connected'))} | ${r.remote ?? '-'} | ${r.error ?? ''} |`);
    }
  }
  const mediaHeaders = targets.map((t) => `${t.name}: ${[...new Set(results[t.name].map((r) => r.media))].join(',') || '-'}`);
  console.log('');
  console.log(`x-voice-edge-media per target: ${mediaHeaders.join('; ')}. Wall time ${((Date.now() - started) / 1000).toFixed(1)} s.`);
  if (values.json) {
    fs.writeFileSync(values.json, JSON.stringify({ runs, warmup, targets, results }, null, 2));
    console.log(`Every call as JSON: ${values.json}`);
  }
  const totalFailures = Object.values(failures).reduce((a, b) => a + b, 0);
  if (totalFailures > 0) {
    console.error(`${totalFailures} call(s) failed: ${JSON.stringify(failures)}\nbrowser console:\n${consoleLines.slice(-50).join('\n')}`);
    exitCode = 1;
  }
  await context.close().catch(() => {});
} catch (e) {
  console.error(e && e.stack ? e.stack : String(e));
  exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  if (statics) await statics.close().catch(() => {});
}
process.exit(exitCode);
