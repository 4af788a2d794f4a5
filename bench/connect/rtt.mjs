#!/usr/bin/env node
// Connection setup on a delayed network, in round trips: headless Chromium → voice-edge (relay) through
// delay.py, a user-space UDP (and optionally TCP) delay stage, at one or more RTTs.
//
//   node bench/connect/rtt.mjs --bin /tmp/voice-edge [--rtt 25,50,100] [--calls 5] [--warmup 1]
//        [--http-delay] [--aiortc-python bench/connect/.venv/bin/python] [--jitter-ms 0] [--json out.json]
//        [--bin-before /tmp/voice-edge-before]   (another build as a third target, 'voice-edge (before)')
//
// It starts voice-edge once (`--http 127.0.0.1:H --relay 127.0.0.1:R --advertise 127.0.0.1:D`, so every
// answer names D, the delay stage, instead of the relay) and, per RTT, delay.py forwarding D → R with that
// RTT (half each way). With --aiortc-python it also starts aiortc_answerer.py (a second target): aiortc opens
// a new port per call, so the page hands each answer to the driver, which points a second delay port at that
// port (delay.py's control socket) and rewrites the answer's candidate to the delay port before
// setRemoteDescription. --http-delay puts the signaling HTTP (both targets) through delay.py's TCP proxy too,
// so the offer POST pays its RTTs (not counted in the phases below, shown as POST→answer).
//
// Per call: new RTCPeerConnection, the shared fake-mic track, data channel 'oai-events', the offer posted as
// created; times taken in the page with performance.now(), every phase counted from the moment
// setRemoteDescription(answer) resolved:
//   ICE        iceConnectionState connected|completed
//   DTLS       the first of RTCDtlsTransport state 'connected' and connectionState 'connected'
//   channel    the data channel's open event
//   session    the first data-channel message of type session.created (voice-edge only)
//   audio      first inbound audio: the audio receiver's inbound-rtp packetsReceived > 0, polled every 5 ms
// The call ends when all have been seen or after --call-timeout-ms (then it counts as failed), hangs up
// ({Location}/hangup) and closes. Prints one markdown table: medians per target and RTT, "ms (x.x RTT)".
// Everything it starts is stopped on exit; delay.py also exits by itself (--max-seconds, or parent gone).
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
const E2E = path.resolve(here, '..', '..', 'tests', 'e2e');
const { launchBrowser, openPage, fmt, SPEECH_WAV, freeTcpPort, freeUdpPort, primaryIPv4 } = await import(path.join(E2E, 'harness.mjs'));
const { launchFirefox, openFirefoxPage } = await import(path.join(E2E, 'firefox.mjs'));
const { startStaticServer } = await import(path.join(E2E, 'realtime-util.mjs'));

const { values } = parseArgs({
  options: {
    bin: { type: 'string', default: process.env.VOICE_EDGE_BIN || '' },
    // A second voice-edge build (e.g. the previous commit's) as one more target, side by side.
    'bin-before': { type: 'string', default: '' },
    // chromium, firefox or both. Firefox never pairs a loopback candidate, nor one learned from a
    // loopback mapped address, so with it in the list the relay and the delay stage both use this
    // machine's primary address (and the answers name the stage there).
    browsers: { type: 'string', default: 'chromium' },
    // The project's own client (`voice-edge loadgen`, the rtc stack) as one more row per build.
    'no-own-client': { type: 'boolean', default: false },
    rtt: { type: 'string', default: '50' },
    calls: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '1' },
    'http-delay': { type: 'boolean', default: false },
    'trace-dir': { type: 'string' },
    model: { type: 'string', default: 'loopback' },
    'aiortc-python': { type: 'string' },
    'jitter-ms': { type: 'string', default: '0' },
    'call-timeout-ms': { type: 'string', default: '15000' },
    'gap-ms': { type: 'string', default: '300' },
    json: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
const USAGE = 'usage: node bench/connect/rtt.mjs --bin PATH [--rtt 25,50,100] [--calls 5] [--warmup 1] [--http-delay] ' +
  '[--browsers chromium,firefox] [--bin-before PATH] [--aiortc-python PY] [--model loopback] [--jitter-ms 0] [--call-timeout-ms 15000] [--gap-ms 300] [--trace-dir DIR] [--json out.json]';
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const rtts = values.rtt.split(',').map((s) => Number(s.trim()));
const calls = Number.parseInt(values.calls, 10);
const warmup = Number.parseInt(values.warmup, 10);
const jitterMs = Number(values['jitter-ms']);
const callTimeoutMs = Number.parseInt(values['call-timeout-ms'], 10);
const gapMs = Number.parseInt(values['gap-ms'], 10);
const browserNames = values.browsers.split(',').map((s) => s.trim()).filter(Boolean);
if (!browserNames.length || !browserNames.every((b) => b === 'chromium' || b === 'firefox')) {
  console.error(`--browsers takes chromium, firefox or both (comma-separated)\n${USAGE}`);
  process.exit(2);
}
// Where the delay stage listens for the media (what the answers name).
const mediaHost = browserNames.includes('firefox') ? primaryIPv4() : '127.0.0.1';
if (!mediaHost) {
  console.error('firefox needs a non-loopback address for the media path, and this machine has none');
  process.exit(2);
}
if (!values.bin || !fs.existsSync(values.bin)) {
  console.error(`no voice-edge binary: --bin ${values.bin || '(none)'} (or VOICE_EDGE_BIN)\n${USAGE}`);
  process.exit(2);
}
if (!rtts.every((r) => r > 0 && r <= 2000) || !(calls > 0 && calls <= 200) || !(warmup >= 0 && warmup <= 20) ||
    !(jitterMs >= 0) || !(callTimeoutMs > 0) || !(gapMs >= 0)) {
  console.error(`--rtt must be 1..2000 ms each, --calls 1..200, --warmup 0..20, --jitter-ms >= 0\n${USAGE}`);
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const started = Date.now();

// --- child processes: all stopped on exit, whatever the reason ----------------------------------------------
const children = new Set();
function killAll(sig = 'SIGKILL') {
  for (const c of children) {
    try { c.kill(sig); } catch { /* gone */ }
  }
}
process.on('exit', () => killAll());
for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => { killAll(); process.exit(128 + (sig === 'SIGINT' ? 2 : 15)); });

/** Spawn a server; its output goes to a ring of lines. A detached watchdog kills it if we die without hooks. */
function startChild(name, cmd, args, env = {}) {
  const lines = [];
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  children.add(child);
  spawn('/bin/sh', ['-c', `while kill -0 ${process.pid} 2>/dev/null && kill -0 ${child.pid} 2>/dev/null; do sleep 1; done; ` +
    `kill -0 ${process.pid} 2>/dev/null || kill -9 ${child.pid} 2>/dev/null; true`], { detached: true, stdio: 'ignore' }).unref();
  const collect = (s) => {
    let buf = '';
    s.setEncoding('utf8');
    s.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        lines.push(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if (lines.length > 500) lines.splice(0, lines.length - 500);
      }
    });
  };
  collect(child.stdout);
  collect(child.stderr);
  child.exitInfo = null;
  const exited = new Promise((r) => child.once('exit', (code, signal) => { child.exitInfo = { code, signal }; children.delete(child); r(); }));
  return {
    name, child, lines,
    async stop() {
      if (child.exitInfo) return;
      child.kill('SIGTERM');
      if (await Promise.race([exited.then(() => true), sleep(5000).then(() => false)])) return;
      child.kill('SIGKILL');
      await exited;
    },
    tail: (n = 30) => lines.slice(-n).join('\n'),
  };
}
async function waitFor(proc, pred, what, ms = 30_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (proc.child.exitInfo) throw new Error(`${proc.name} exited (${JSON.stringify(proc.child.exitInfo)}) before ${what}:\n${proc.tail()}`);
    if (await pred()) return;
    await sleep(100);
  }
  throw new Error(`${proc.name}: no ${what} after ${ms} ms:\n${proc.tail()}`);
}
const httpOk = (url) => async () => {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
    await r.arrayBuffer();
    return r.ok;
  } catch { return false; }
};

/** Tell delay.py's control socket which port new clients of the dynamic stage go to. */
function setDelayTarget(controlPort, target) {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket('udp4');
    const timer = setTimeout(() => { s.close(); reject(new Error('delay control: no reply')); }, 2000);
    s.on('message', (m) => { clearTimeout(timer); s.close(); m.toString() === 'ok' ? resolve() : reject(new Error(m.toString())); });
    s.send(`target ${target}`, controlPort, '127.0.0.1');
  });
}

// --- the page --------------------------------------------------------------------------------------------------
const PAGE_SCRIPT = String.raw`
const now = () => performance.now();
let mic = null;
window.openMic = async () => {
  if (!mic) mic = await navigator.mediaDevices.getUserMedia({ audio: true });
  return mic.getAudioTracks().length;
};
window.placeCall = async ({ base, model, timeoutMs, route, expectSession }) => {
  const r = { t: {}, events: [], error: null, statsPolls: 0 };
  const pc = new RTCPeerConnection();
  let t0 = null, tr = null; // POST sent, setRemoteDescription resolved
  const mark = (k) => { if (t0 != null && r.t[k] == null) r.t[k] = now() - t0; };
  const ev = (what) => { if (t0 != null) r.events.push([Math.round((now() - t0) * 10) / 10, what]); };
  let done;
  const finished = new Promise((res) => (done = res));
  const check = () => {
    const t = r.t;
    if (t.ice != null && t.dtls != null && t.dcOpen != null && t.audio != null && (!expectSession || t.session != null)) done();
  };
  pc.addEventListener('iceconnectionstatechange', () => {
    const s = pc.iceConnectionState;
    ev('ice ' + s);
    if (s === 'connected' || s === 'completed') { mark('ice'); check(); }
    if (s === 'failed') { r.error = r.error || 'ICE failed'; done(); }
  });
  pc.addEventListener('connectionstatechange', () => {
    const s = pc.connectionState;
    ev('pc ' + s);
    if (s === 'connected') { mark('pcConnected'); mark('dtls'); check(); }
    if (s === 'failed') { r.error = r.error || 'connection failed'; done(); }
  });
  pc.addEventListener('track', (e) => {
    e.track.addEventListener('unmute', () => { ev('track unmute'); mark('unmute'); });
  });
  pc.addTrack(mic.getAudioTracks()[0], mic);
  const dc = pc.createDataChannel('oai-events');
  dc.addEventListener('open', () => { ev('dc open'); mark('dcOpen'); check(); });
  dc.addEventListener('message', (e) => {
    let type = '?';
    try { type = JSON.parse(e.data).type; } catch (_) {}
    if (r.t.firstMessage == null) r.firstMessageType = type;
    mark('firstMessage');
    if (type === 'session.created') { ev('session.created'); mark('session'); check(); }
  });
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  let hangupUrl = null;
  let polling = false;
  try {
    t0 = now();
    const res = await fetch(base + '/v1/realtime/calls?model=' + encodeURIComponent(model), {
      method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: offer.sdp,
    });
    let body = await res.text();
    mark('answer');
    r.status = res.status;
    const loc = res.headers.get('Location');
    if (loc) hangupUrl = new URL(loc, base + '/').href.replace(/\/$/, '') + '/hangup';
    if (!res.ok) throw new Error('POST → ' + res.status + ': ' + body.slice(0, 200));
    if (route) body = await window.veRouteAnswer(body); // aiortc: through the delay stage
    r.answerCandidates = (body.match(/a=candidate:[^\r\n]*/g) || []).map((c) => c.split(' ').slice(4, 6).join(':'));
    r.answerIceLite = /a=ice-lite/.test(body);
    r.answerSetup = (body.match(/a=setup:(\w+)/) || [])[1] || null;
    await pc.setRemoteDescription({ type: 'answer', sdp: body });
    mark('remoteSet');
    const dtls = pc.getSenders()[0] && pc.getSenders()[0].transport;
    if (dtls) {
      const onDtls = () => { ev('dtls ' + dtls.state); if (dtls.state === 'connected') { mark('dtlsTransport'); mark('dtls'); check(); } };
      dtls.addEventListener('statechange', onDtls);
      if (dtls.state === 'connected') onDtls();
    }
    // First inbound audio packet: poll the audio receiver's stats every 5 ms.
    const receiver = pc.getReceivers().find((x) => x.track && x.track.kind === 'audio');
    polling = true;
    (async () => {
      while (polling && r.t.audio == null) {
        try {
          const st = await (receiver ? receiver.getStats() : pc.getStats());
          r.statsPolls++;
          st.forEach((s) => {
            if (s.type === 'inbound-rtp' && s.kind === 'audio' && s.packetsReceived > 0 && r.t.audio == null) {
              mark('audio');
              r.audioStat = { packetsReceived: s.packetsReceived, lastPacketReceivedTimestamp: s.lastPacketReceivedTimestamp ?? null,
                statsTimestamp: s.timestamp, observedAt: performance.timeOrigin + now(), t0At: performance.timeOrigin + t0 };
              ev('audio packets ' + s.packetsReceived);
              check();
            }
          });
        } catch (e) { r.statsError = String(e); }
        await new Promise((res) => setTimeout(res, 5));
      }
    })();
    const timer = setTimeout(() => {
      const missing = ['ice', 'dtls', 'dcOpen', 'audio', ...(expectSession ? ['session'] : [])].filter((k) => r.t[k] == null);
      r.error = r.error || 'timeout after ' + timeoutMs + ' ms without ' + missing.join(', ');
      done();
    }, timeoutMs);
    await finished;
    clearTimeout(timer);
    try {
      const stats = await pc.getStats();
      const byId = new Map();
      stats.forEach((s) => byId.set(s.id, s));
      stats.forEach((s) => {
        if (s.type !== 'transport') return;
        r.dtlsRole = s.dtlsRole ?? null;
        const pair = byId.get(s.selectedCandidatePairId);
        const rc = pair && byId.get(pair.remoteCandidateId);
        if (rc) r.remote = rc.address + ':' + rc.port + ' ' + rc.candidateType;
        if (pair) { r.stunRequestsSent = pair.requestsSent; r.pairRtt = pair.currentRoundTripTime ?? null; }
      });
    } catch (e) { r.statsError = String(e); }
  } catch (e) {
    r.error = r.error || String(e && e.message ? e.message : e);
  } finally {
    polling = false;
    if (hangupUrl) { try { await fetch(hangupUrl, { method: 'POST' }); } catch (_) {} }
    try { dc.close(); } catch (_) {}
    pc.close();
  }
  return r;
};
`;
const HTML = `<!doctype html><html><head><meta charset="utf-8"><title>rtt bench</title></head>
<body><p>connect-over-RTT bench</p><script>${PAGE_SCRIPT}</script></body></html>`;

// --- statistics ------------------------------------------------------------------------------------------------
function median(xs) {
  const v = xs.filter((x) => typeof x === 'number').sort((a, b) => a - b);
  if (v.length === 0) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}
const since = (t, k, from = 'remoteSet') => (typeof t[k] === 'number' && typeof t[from] === 'number' ? t[k] - t[from] : null);
const PHASES = [
  ['ICE', (t) => since(t, 'ice')],
  ['DTLS', (t) => since(t, 'dtls')],
  ['channel open', (t) => since(t, 'dcOpen')],
  ['session.created', (t) => since(t, 'session')],
  ['first audio', (t) => since(t, 'audio')],
  ['track unmute', (t) => since(t, 'unmute')],
];
const cell = (ms, rtt) => (ms == null ? '-' : `${fmt(ms)} (${(ms / rtt).toFixed(1)} RTT)`);

// --- the project's own client ----------------------------------------------------------------------------------
/**
 * `calls` calls from `voice-edge loadgen` (this build's, the rtc stack as a client) to build `v` through the delay
 * stage: its report's medians from the offer POST, turned into phases from the answer like the browsers' rows.
 * It has no session.created timing (it does not wait for one) and counts its first echoed packet as first audio.
 */
async function ownClientRow(v, rtt) {
  const args = ['loadgen', '--url', `http://127.0.0.1:${v.front ?? v.http}`, '--sessions', String(calls), '--ramp', '2',
    '--duration', '2', '--setup-timeout', '10', '--workers', '1', '--model', values.model];
  const out = await new Promise((resolve) => {
    const c = spawn(values.bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(c);
    let text = '';
    c.stdout.on('data', (d) => (text += d));
    const timer = setTimeout(() => c.kill('SIGKILL'), (calls / 2 + 30) * 1000);
    c.on('exit', () => { clearTimeout(timer); children.delete(c); resolve(text); });
  });
  const p50 = (name) => {
    const line = out.split('\n').find((l) => l.startsWith(`| ${name} |`));
    const x = line ? Number.parseFloat(line.split('|')[2]) : NaN;
    return Number.isFinite(x) ? x : null;
  };
  const answer = p50('offer posted → answer received');
  const from = (name) => { const x = p50(name); return x == null || answer == null ? null : x - answer; };
  const m = /sessions connected \(DTLS\) \/ failed \| (\d+) \/ (\d+) of (\d+)/.exec(out);
  const [connected, failed, offered] = m ? [m[1], Number(m[2]), m[3]] : ['0', calls, String(calls)];
  const cells = [from('offer posted → ICE connected'), from('offer posted → DTLS connected'),
    from('offer posted → oai-events open')].map((x) => cell(x, rtt));
  const echo = cell(from('offer posted → first echoed packet'), rtt);
  process.stderr.write(`RTT ${rtt} loadgen → ${v.name}: ${m ? m[0] : 'no report'}\n`);
  return {
    failed: failed > 0 || !m,
    line: `| voice-edge loadgen | ${v.name} | ${rtt} ms | ${offered} | ${connected} | ${failed} | ${cell(answer, rtt)} | ${cells.join(' | ')} | n/a | ${echo} | n/a |`,
  };
}

// --- run -------------------------------------------------------------------------------------------------------
let exitCode = 0;
let browser = null;
/** The browsers driving calls: { name, browser, version, context, page, consoleLines, targets }. */
const browsers = [];
let statics = null;
let delay = null;
const servers = [];
const rows = [];
const allCalls = [];
try {
  // voice-edge, once per build: answers name D (the delay stage), the relay binds R.
  const builds = [{ name: 'voice-edge', bin: values.bin }];
  if (values['bin-before']) builds.push({ name: 'voice-edge (before)', bin: values['bin-before'] });
  const ves = [];
  for (const b of builds) {
    const http = await freeTcpPort();
    const relayUdp = await freeUdpPort(mediaHost);
    const delayUdp = await freeUdpPort(mediaHost);
    const child = startChild(b.name, b.bin,
      ['--http', `127.0.0.1:${http}`, '--relay', `${mediaHost}:${relayUdp}`, '--advertise', `${mediaHost}:${delayUdp}`],
      { RUST_LOG: process.env.RUST_LOG || 'warn' });
    servers.push(child);
    await waitFor(child, httpOk(`http://127.0.0.1:${http}/`), 'HTTP listener');
    ves.push({ ...b, http, relayUdp, delayUdp, front: values['http-delay'] ? await freeTcpPort() : null });
  }
  const versionOf = (bin) => new Promise((res) => {
    const c = spawn(bin, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.on('exit', () => res(out.trim()));
  });
  const version = (await Promise.all(ves.map(async (v) => `${v.name}: ${await versionOf(v.bin)}`))).join(', ');

  // aiortc (optional): its answers name a new port per call; a dynamic delay port goes in front of it.
  let aiortc = null;
  if (values['aiortc-python']) {
    const aHttp = await freeTcpPort();
    const a = startChild('aiortc', values['aiortc-python'], [path.join(here, 'aiortc_answerer.py'), '--port', String(aHttp), '--max-call-secs', '30']);
    servers.push(a);
    await waitFor(a, httpOk(`http://127.0.0.1:${aHttp}/`), 'HTTP listener');
    aiortc = { http: aHttp, udp: await freeUdpPort(), control: await freeUdpPort() };
  }
  const tcpFront = { aiortc: values['http-delay'] && aiortc ? await freeTcpPort() : null };
  const targets = ves.map((v) => ({ name: v.name, base: `http://127.0.0.1:${v.front ?? v.http}`, route: false, expectSession: true }));
  if (aiortc) targets.push({ name: 'aiortc', base: `http://127.0.0.1:${tcpFront.aiortc ?? aiortc.http}`, route: true, expectSession: false });

  statics = await startStaticServer({ '/': { type: 'text/html; charset=utf-8', body: HTML } });
  for (const name of browserNames) {
    let b;
    if (name === 'chromium') {
      browser = await launchBrowser({ audioFile: SPEECH_WAV });
      b = { name, browser, version: `Chromium ${browser.version()}`, ...(await openPage(browser, statics.origin + '/')), targets };
      await b.page.exposeFunction('veRouteAnswer', async (sdp) => {
        const ports = [...new Set([...sdp.matchAll(/a=candidate:\S+ \d+ udp \d+ 127\.0\.0\.1 (\d+) typ host/gi)].map((m) => m[1]))];
        if (ports.length !== 1) throw new Error(`expected one 127.0.0.1 host candidate port in the aiortc answer, got [${ports}]`);
        await setDelayTarget(aiortc.control, `127.0.0.1:${ports[0]}`);
        return sdp.replace(new RegExp(` 127\\.0\\.0\\.1 ${ports[0]} typ host`, 'g'), ` 127.0.0.1 ${aiortc.udp} typ host`);
      });
    } else {
      // aiortc's answers name a loopback port, which Firefox never pairs: voice-edge targets only.
      const ff = await launchFirefox();
      b = { name, browser: ff, version: `Firefox ${await ff.version()}`, ...(await openFirefoxPage(ff, statics.origin + '/')), targets: targets.filter((t) => !t.route) };
    }
    await b.page.evaluate(() => window.openMic());
    browsers.push(b);
  }

  const perRttBudgetS = Math.ceil(((calls + warmup) * targets.length * browsers.length * (callTimeoutMs + gapMs + 5000)) / 1000) + 60;
  for (const rtt of rtts) {
    const args = [path.join(here, 'delay.py'), '--rtt-ms', String(rtt), '--jitter-ms', String(jitterMs),
      '--max-seconds', String(perRttBudgetS)];
    for (const v of ves) args.push('--udp', `${mediaHost}:${v.delayUdp}=${mediaHost}:${v.relayUdp}`);
    if (aiortc) args.push('--udp', `127.0.0.1:${aiortc.udp}=dynamic`, '--control', `127.0.0.1:${aiortc.control}`);
    if (values['trace-dir']) args.push('--trace', path.join(values['trace-dir'], `delay-rtt${rtt}.txt`));
    for (const v of ves) if (v.front) args.push('--tcp', `127.0.0.1:${v.front}=127.0.0.1:${v.http}`);
    if (tcpFront.aiortc) args.push('--tcp', `127.0.0.1:${tcpFront.aiortc}=127.0.0.1:${aiortc.http}`);
    delay = startChild(`delay.py (RTT ${rtt} ms)`, 'python3', args);
    await waitFor(delay, async () => delay.lines.some((l) => l.startsWith('delay ready')), 'ready line', 10_000);

    for (const b of browsers) {
    const { page, targets } = b;
    const results = Object.fromEntries(targets.map((t) => [t.name, []]));
    for (let round = -warmup; round < calls; round++) {
      const k = ((round % targets.length) + targets.length) % targets.length;
      for (const tgt of [...targets.slice(k), ...targets.slice(0, k)]) {
        const r = await Promise.race([
          page.evaluate((a) => window.placeCall(a), { base: tgt.base, model: values.model, timeoutMs: callTimeoutMs, route: tgt.route, expectSession: tgt.expectSession }),
          sleep(callTimeoutMs + 10_000 + 4 * rtt).then(() => ({ t: {}, events: [], error: 'page did not return' })),
        ]);
        Object.assign(r, { browser: b.name, target: tgt.name, rtt, round: round + 1, warmup: round < 0 });
        const t = r.t;
        process.stderr.write(`RTT ${rtt} ${b.name} ${round < 0 ? 'warm-up' : `call ${round + 1}/${calls}`} ${tgt.name.padEnd(10)} ` +
          `POST→answer ${fmt(t.answer)}  from answer set: ice ${fmt(since(t, 'ice'))} dtls ${fmt(since(t, 'dtls'))} ` +
          `dc ${fmt(since(t, 'dcOpen'))} session ${fmt(since(t, 'session'))} audio ${fmt(since(t, 'audio'))} ` +
          `unmute ${fmt(since(t, 'unmute'))} ms (remote ${r.remote}, ${r.statsPolls} polls)` + (r.error ? ` ERROR ${r.error}` : '') + '\n');
        allCalls.push(r);
        if (round >= 0) results[tgt.name].push(r);
        await sleep(gapMs);
      }
    }
    for (const tgt of targets) {
      const rs = results[tgt.name];
      const connected = rs.filter((r) => r.t.dtls != null).length;
      const failed = rs.filter((r) => r.error).length;
      const cells = PHASES.map(([name, f]) => (name === 'session.created' && !tgt.expectSession ? 'n/a' : cell(median(rs.map((r) => f(r.t))), rtt)));
      rows.push(`| ${b.name} | ${tgt.name} | ${rtt} ms | ${rs.length} | ${connected} | ${failed} | ${cell(median(rs.map((r) => r.t.answer)), rtt)} | ${cells.join(' | ')} |`);
      if (failed) {
        exitCode = 1;
        console.error(`${b.name}: some calls failed; browser console:\n${b.consoleLines.slice(-30).join('\n')}`);
      }
    }
    }
    if (!values['no-own-client']) {
      for (const v of ves) {
        const row = await ownClientRow(v, rtt);
        rows.push(row.line);
        if (row.failed) exitCode = 1;
      }
    }
    await delay.stop();
    process.stderr.write(`${delay.lines.filter((l) => l.startsWith('delay done')).join('')}\n`);
    delay = null;
  }

  const cpus = os.cpus();
  console.log(`## Connection setup over a delayed network, medians (headless ${browsers.map((b) => b.version).join(' and ')}; media via ${mediaHost}; ${version}, ` +
    `${calls} call(s) per target and RTT after ${warmup} warm-up; jitter ${jitterMs} ms; signaling HTTP ${values['http-delay'] ? 'delayed too' : 'not delayed'}; ` +
    `${cpus.length} CPU(s); ${new Date().toISOString()})`);
  console.log('');
  console.log('Phases in ms from setRemoteDescription(answer) resolved, and in RTTs; POST→answer from the offer POST.');
  console.log('');
  const head = ['browser', 'target', 'RTT', 'calls offered', 'connected', 'failed', 'POST→answer', ...PHASES.map(([n]) => n)];
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map(() => '---').join('|')}|`);
  for (const row of rows) console.log(row);
  console.log('');
  console.log(`Wall time ${((Date.now() - started) / 1000).toFixed(1)} s.`);
  if (values.json) {
    fs.writeFileSync(values.json, JSON.stringify({ rtts, calls, warmup, jitterMs, httpDelay: values['http-delay'], version, calls_: allCalls }, null, 2));
    console.log(`Every call as JSON: ${values.json}`);
  }
  for (const b of browsers) await b.context.close().catch(() => {});
} catch (e) {
  console.error(e && e.stack ? e.stack : String(e));
  for (const s of servers) console.error(`--- ${s.name} log tail:\n${s.tail()}`);
  exitCode = 1;
} finally {
  for (const b of browsers) await b.browser.close().catch(() => {});
  if (statics) await statics.close().catch(() => {});
  if (delay) await delay.stop();
  for (const s of servers.reverse()) await s.stop();
}
process.exit(exitCode);
