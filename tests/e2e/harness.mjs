// Shared by demo.test.mjs, connect-timings.mjs, realtime-sdk.test.mjs and plain-flow.test.mjs: start the
// voice-edge binary, drive pages in Debian's chromium (headless, fake microphone looping a fixtures/ WAV,
// fixtures/speech.wav by default), collect diagnostics.
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(here, '..', '..');
export const SPEECH_WAV = path.join(REPO_ROOT, 'fixtures', 'speech.wav');
export const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
export const STEPS = ['offerPosted', 'answerReceived', 'iceConnected', 'dtlsConnected', 'dataChannelOpen', 'firstAudio'];

/** Path of the server binary: $VOICE_EDGE_BIN (relative to the repo root) or target/x86_64-unknown-linux-gnu/release/voice-edge. */
export function serverBin() {
  return path.resolve(REPO_ROOT, process.env.VOICE_EDGE_BIN || 'target/x86_64-unknown-linux-gnu/release/voice-edge');
}

/** A TCP port that was free a moment ago. */
export function freeTcpPort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * The first non-internal IPv4 address of this machine (what `--relay auto` binds when it is the default
 * route's interface), or null.
 */
export function primaryIPv4() {
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs || []) if ((a.family === 'IPv4' || a.family === 4) && !a.internal) return a.address;
  }
  return null;
}

/** A UDP port on `host` that was free a moment ago. */
export function freeUdpPort(host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const sock = dgram.createSocket('udp4');
    sock.on('error', reject);
    sock.bind(0, host, () => {
      const { port } = sock.address();
      sock.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Every server we start is killed when this process goes away, whatever the reason.
const liveServers = new Set();
process.on('exit', () => {
  for (const child of liveServers) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
});
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => {
    for (const child of liveServers) child.kill('SIGKILL');
    process.exit(128 + (sig === 'SIGINT' ? 2 : 15));
  });
}

/**
 * Spawn the all-in-one server on free ports and wait (up to readyMs) until GET / answers.
 * `relay`: 'auto' (the default's address choice, `--relay auto:PORT`: the machine's primary non-loopback
 * address, which Firefox needs) or 'loopback' (127.0.0.1, which only Chromium pairs with).
 * Returns {child, baseUrl, httpAddr, relayAddr (the media address answers name), lanUrl (with --lan), log(), stop()}.
 */
export async function startServer({ readyMs = 30_000, extraArgs = [], relay = 'auto', env = {} } = {}) {
  const bin = serverBin();
  if (!fs.existsSync(bin)) {
    throw new Error(`server binary not found: ${bin} (build it with \`cargo build --release\` or set VOICE_EDGE_BIN)`);
  }
  const httpPort = await freeTcpPort();
  const httpAddr = `127.0.0.1:${httpPort}`;
  const relayArg =
    relay === 'loopback' ? `127.0.0.1:${await freeUdpPort()}` : `auto:${await freeUdpPort(primaryIPv4() || '127.0.0.1')}`;
  const args = ['--http', httpAddr, '--relay', relayArg, ...extraArgs];

  const lines = [];
  const child = spawn(bin, args, {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { RUST_LOG: 'info', ...process.env, ...env },
  });
  liveServers.add(child);
  // If this process dies without running its exit hooks (SIGKILL, a killed test runner), a detached watchdog
  // still kills the server within a second. It exits by itself once either process is gone.
  spawn(
    '/bin/sh',
    ['-c', `while kill -0 ${process.pid} 2>/dev/null && kill -0 ${child.pid} 2>/dev/null; do sleep 1; done; kill -0 ${process.pid} 2>/dev/null || kill -9 ${child.pid} 2>/dev/null; true`],
    { detached: true, stdio: 'ignore' },
  ).unref();
  let exited = null;
  child.on('exit', (code, signal) => {
    exited = { code, signal };
    liveServers.delete(child);
  });
  const collect = (stream, tag) => {
    let buf = '';
    stream.setEncoding('utf8');
    stream.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        lines.push(`[${tag}] ${buf.slice(0, i)}`);
        buf = buf.slice(i + 1);
        if (lines.length > 2000) lines.splice(0, lines.length - 2000);
      }
    });
    stream.on('end', () => buf && lines.push(`[${tag}] ${buf}`));
  };
  collect(child.stdout, 'server');
  collect(child.stderr, 'server!');

  const server = {
    child,
    bin,
    args,
    baseUrl: `http://${httpAddr}/`,
    httpAddr,
    relayAddr: null, // read from the startup banner below

    log: () => lines.join('\n'),
    async stop() {
      if (exited) return exited;
      const done = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
      child.kill('SIGTERM'); // the binary shuts down cleanly on SIGTERM / Ctrl-C
      const res = await Promise.race([done, sleep(5000).then(() => null)]);
      if (res) return res;
      child.kill('SIGKILL');
      return done;
    },
  };

  const deadline = Date.now() + readyMs;
  let lastErr = null;
  while (Date.now() < deadline) {
    if (exited) {
      throw new Error(
        `server exited before it was ready (code ${exited.code}, signal ${exited.signal}): ${bin} ${args.join(' ')}\n` +
          server.log(),
      );
    }
    try {
      const res = await fetch(server.baseUrl, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      // The banner follows the listeners; it names the media address every answer carries.
      const media = server.log().match(/clients send UDP to (\S+?)[;,]/);
      if (res.ok && media) {
        server.relayAddr = media[1];
        server.lanUrl = server.log().match(/open (https:\/\/\S+)/)?.[1] ?? null; // --lan only
        return server;
      }
      lastErr = new Error(`GET / → ${res.status}`);
    } catch (e) {
      lastErr = e;
    }
    await sleep(100);
  }
  await server.stop();
  throw new Error(`server not ready on ${server.baseUrl} after ${readyMs} ms (${lastErr && lastErr.message})\n${server.log()}`);
}

/**
 * The chromium flags the e2e test is specified with: headless, fake mic playing the speech fixture
 * (or `audioFile`, a WAV that chromium loops as the microphone).
 */
export function chromiumArgs(audioFile = SPEECH_WAV) {
  return [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--use-fake-ui-for-media-stream',
    '--use-fake-device-for-media-stream',
    `--use-file-for-fake-audio-capture=${audioFile}`,
    '--autoplay-policy=no-user-gesture-required',
  ];
}

/** Headless chromium whose fake microphone loops `audioFile` (default fixtures/speech.wav). */
export async function launchBrowser({ audioFile = SPEECH_WAV } = {}) {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`chromium not found at ${CHROMIUM} (apt-get install chromium)`);
  if (!fs.existsSync(audioFile)) throw new Error(`fixture missing: ${audioFile}`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: chromiumArgs(audioFile), timeout: 30_000 });
}

/** A fresh context + page on the demo, with console/page errors captured into `console` lines. */
export async function openDemo(browser, baseUrl) {
  return openPage(browser, baseUrl);
}

/** A fresh context + page on `url`, with console/page errors and HTTP failures captured into `consoleLines`. */
export async function openPage(browser, url) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const consoleLines = capturePageLog(page);
  await page.goto(url, { waitUntil: 'load', timeout: 15_000 });
  return { context, page, consoleLines };
}

/**
 * Console messages, page errors, failed requests and HTTP errors of `page`, collected into the returned
 * array for failure dumps. Playwright and puppeteer pages emit these events with the same names and shapes.
 */
export function capturePageLog(page) {
  const lines = [];
  page.on('console', (m) => lines.push(`[console.${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => lines.push(`[pageerror] ${e.stack || e.message}`));
  page.on('requestfailed', (r) => lines.push(`[requestfailed] ${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
  page.on('response', (r) => {
    if (r.status() >= 400) lines.push(`[http ${r.status()}] ${r.request().method()} ${r.url()}`);
  });
  return lines;
}

/** Snapshot of window.voiceEdge without the RTCPeerConnection. */
export function pageState(page) {
  return page.evaluate(() => {
    const ve = window.voiceEdge;
    if (!ve) return null;
    return {
      state: ve.state,
      error: ve.error ?? null,
      timings: ve.timings,
      path: ve.path,
      events: ve.events,
      pc: ve.pc
        ? {
            signalingState: ve.pc.signalingState,
            iceConnectionState: ve.pc.iceConnectionState,
            connectionState: ve.pc.connectionState,
            dtlsState: ve.pc.getSenders()[0]?.transport?.state ?? null,
          }
        : null,
    };
  });
}

/** The parts of pc.getStats() that matter here, plus the answer SDP. */
export function rtcStats(page) {
  return page.evaluate(async () => {
    const pc = window.voiceEdge && window.voiceEdge.pc;
    if (!pc) return null;
    const out = { inbound: null, outbound: null, pair: null, localCandidate: null, remoteCandidate: null, transport: null, codecs: [] };
    let report;
    try {
      report = await pc.getStats();
    } catch (e) {
      return { error: String(e) };
    }
    const byId = new Map();
    report.forEach((s) => byId.set(s.id, s));
    const pick = (s, keys) => Object.fromEntries(keys.filter((k) => s[k] !== undefined).map((k) => [k, s[k]]));
    report.forEach((s) => {
      if (s.type === 'inbound-rtp' && s.kind === 'audio') {
        out.inbound = pick(s, ['packetsReceived', 'packetsLost', 'bytesReceived', 'totalAudioEnergy', 'audioLevel',
          'totalSamplesReceived', 'concealedSamples', 'jitter', 'codecId', 'ssrc', 'trackIdentifier']);
      }
      if (s.type === 'outbound-rtp' && s.kind === 'audio') out.outbound = pick(s, ['packetsSent', 'bytesSent', 'codecId', 'ssrc']);
      if (s.type === 'transport') {
        out.transport = pick(s, ['dtlsState', 'iceState', 'dtlsRole', 'selectedCandidatePairId', 'srtpCipher', 'tlsVersion', 'packetsSent', 'packetsReceived']);
      }
      if (s.type === 'codec') out.codecs.push(pick(s, ['mimeType', 'clockRate', 'channels', 'payloadType', 'sdpFmtpLine']));
    });
    const pairId = out.transport && out.transport.selectedCandidatePairId;
    const pair = pairId && byId.get(pairId);
    if (pair) {
      out.pair = pick(pair, ['state', 'nominated', 'currentRoundTripTime', 'requestsSent', 'responsesReceived', 'bytesSent', 'bytesReceived']);
      const l = byId.get(pair.localCandidateId);
      const r = byId.get(pair.remoteCandidateId);
      if (l) out.localCandidate = pick(l, ['address', 'port', 'protocol', 'candidateType']);
      if (r) out.remoteCandidate = pick(r, ['address', 'port', 'protocol', 'candidateType']);
    }
    out.answerSdp = pc.remoteDescription ? pc.remoteDescription.sdp : null;
    out.offerSdp = pc.localDescription ? pc.localDescription.sdp : null;
    return out;
  });
}

/**
 * Click Start and wait until the page reports first audio back (or fails).
 * Returns the page state; throws with the page's error message on failure/timeout.
 */
export async function startCallAndWaitForAudio(page, { timeoutMs = 20_000 } = {}) {
  await page.click('#start');
  let handle;
  try {
    handle = await page.waitForFunction(
      () => {
        const ve = window.voiceEdge;
        return ve && (ve.timings.firstAudio != null || ve.state === 'failed') ? ve.state : false;
      },
      null,
      { timeout: timeoutMs, polling: 50 },
    );
  } catch (e) {
    const st = await pageState(page).catch(() => null);
    throw new Error(`no audio back within ${timeoutMs} ms; page state: ${JSON.stringify(st)}`);
  }
  const st = await pageState(page);
  if (st.state === 'failed') throw new Error(`call failed on the page: ${st.error}; page state: ${JSON.stringify(st)}`);
  await handle.dispose();
  return st;
}

/** Human-readable dump for a failure: page state, stats, SDPs, console, server log. */
export async function diagnostics({ page, consoleLines, server }) {
  const parts = [];
  if (page) {
    try {
      parts.push(`page state: ${JSON.stringify(await pageState(page), null, 2)}`);
      const stats = await rtcStats(page);
      if (stats) {
        const { answerSdp, offerSdp, ...rest } = stats;
        parts.push(`getStats: ${JSON.stringify(rest, null, 2)}`);
        parts.push(`offer SDP:\n${offerSdp}`);
        parts.push(`answer SDP:\n${answerSdp}`);
      }
      const shown = await page.evaluate(() => ({
        error: document.querySelector('#error')?.textContent,
        steps: [...document.querySelectorAll('[data-step]')].map((e) => `${e.dataset.step}=${e.querySelector('.ms')?.textContent}`),
        path: [...document.querySelectorAll('[data-path]')].map((e) => `${e.dataset.path}=${e.textContent}`),
      }));
      parts.push(`page shows: ${JSON.stringify(shown)}`);
    } catch (e) {
      parts.push(`(could not read page: ${e.message})`);
    }
  }
  if (consoleLines) parts.push(`browser console (${consoleLines.length} lines):\n${consoleLines.join('\n')}`);
  if (server) parts.push(await serverDiagnostics(server));
  return parts.join('\n\n');
}

/** The server half of a failure dump: command line, GET /admin/stats (and `adminPaths`), server log tail. */
export async function serverDiagnostics(server, { adminPaths = ['/admin/stats'], logLines = 200 } = {}) {
  const parts = [`server: ${server.bin} ${server.args.join(' ')}`];
  for (const p of adminPaths) {
    try {
      const res = await fetch(new URL(p, server.baseUrl), { signal: AbortSignal.timeout(2000) });
      parts.push(`GET ${p} → ${res.status}: ${await res.text()}`);
    } catch (e) {
      parts.push(`GET ${p} failed: ${e.message}`);
    }
  }
  const log = server.log().split('\n');
  parts.push(`server log (last ${Math.min(log.length, logLines)} lines):\n${log.slice(-logLines).join('\n')}`);
  return parts.join('\n\n');
}

/** `| step | ... |` one-liner for the six timings. */
export function timingsLine(timings) {
  return '| ' + STEPS.map((s) => `${s} ${fmt(timings[s])} ms`).join(' | ') + ' |';
}

export function fmt(v) {
  return typeof v === 'number' ? (Math.round(v * 10) / 10).toFixed(1) : String(v);
}

/**
 * For VOICE_EDGE_DEMO_WEB: a front server that serves the demo page from `dir` (relative to the repo
 * root) and proxies everything else to `target` (the binary's base URL), WebSocket upgrades included
 * (the sideband pane's GET /v1/realtime?call_id=). Returns {url, close()}.
 */
export async function webFront(dir, target) {
  const root = path.resolve(REPO_ROOT, dir);
  const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css' };
  const t = new URL(target);
  const sockets = new Set();
  const srv = http.createServer((req, res) => {
    const p = new URL(req.url, 'http://x').pathname;
    const file = path.join(root, p === '/' ? 'index.html' : p);
    if (req.method === 'GET' && file.startsWith(root) && fs.existsSync(file) && fs.statSync(file).isFile()) {
      res.writeHead(200, { 'content-type': types[path.extname(file)] || 'application/octet-stream' }).end(fs.readFileSync(file));
      return;
    }
    const up = http.request({ host: t.hostname, port: t.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on('error', (e) => res.writeHead(502).end(String(e)));
    req.pipe(up);
  });
  // An upgrade: the request as it came, to the binary, then bytes both ways.
  srv.on('upgrade', (req, socket, head) => {
    const up = net.connect(Number(t.port), t.hostname, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      up.write(lines.join('\r\n') + '\r\n\r\n');
      if (head && head.length) up.write(head);
      up.pipe(socket);
      socket.pipe(up);
    });
    for (const s of [socket, up]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    up.on('error', () => socket.destroy());
    socket.on('error', () => up.destroy());
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${srv.address().port}/`,
    close: () => {
      for (const s of sockets) s.destroy();
      srv.close();
    },
  };
}
