// Debian's headless firefox-esr for the e2e tests, driven over WebDriver BiDi by puppeteer-core (Playwright's
// Firefox is a patched build that cannot be downloaded here; puppeteer-core drives the stock one).
//
//   const server = await startServer();   // harness.mjs: --relay auto, the machine's primary address
//   const browser = await launchFirefox();
//   const { page, consoleLines } = await openFirefoxPage(browser, server.baseUrl);
//   ... await firefoxPageState(page), await firefoxRtcStats(page) ...
//   await browser.close();
//
// What differs from chromium (harness.mjs):
// - The fake microphone is a steady tone (media.navigator.streams.fake), not a WAV file: it never pauses,
//   so server VAD never ends a turn. End it from the test: input_audio_buffer.commit + response.create on
//   the data channel (the demo exposes it as window.voiceEdge.dc), or use the tts model with a text message.
// - Firefox never pairs its candidates with a loopback remote candidate: with the relay on 127.0.0.1 no
//   STUN check reaches it, ICE fails after ~5 s and the demo page reports "DTLS handshake failed"
//   (media.peerconnection.ice.loopback=true does not change that). So the relay must listen on a
//   non-loopback address, which is what the server's default (--relay auto) does. The page itself can stay on
//   http://127.0.0.1 (loopback http is a secure context, so getUserMedia works there; about:blank is not).
// - Headless Firefox has no audio output: AudioContext stays 'suspended' and <audio> plays nowhere. Check
//   audio via getStats() inbound-rtp (Firefox 153 ESR has packetsReceived, bytesReceived and totalAudioEnergy there).
// - puppeteer's page API is close to Playwright's, but waitForFunction takes (fn, options, ...args) instead
//   of Playwright's (fn, arg, options); use waitForPage() below. browser.createBrowserContext() (a BiDi
//   user context) stands in for Playwright's browser.newContext() and has the same close().
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import puppeteer from 'puppeteer-core';
import { capturePageLog, pageState, rtcStats } from './harness.mjs';

export const FIREFOX = process.env.FIREFOX_BIN || '/usr/bin/firefox-esr';

/**
 * Prefs on top of puppeteer's test profile. That profile (user.js from @puppeteer/browsers) plus the
 * "recommended" prefs Firefox's remote agent applies already turn off updates, safe browsing, telemetry
 * and data reporting, captive-portal/connectivity checks, push and first-run pages, so none of those are
 * repeated here; adding them changed neither launch time (~3-4 s, mostly BiDi session.new waiting for
 * the first window) nor behaviour.
 */
export const FIREFOX_PREFS = {
  // Required: a fake microphone (a steady tone) and no permission prompt for it.
  'media.navigator.streams.fake': true,
  'media.navigator.permission.disabled': true,
  // The demo's audio.play() in ontrack was refused now and then (NotAllowedError, ~1 run in 6: the click's
  // user activation does not always count). Headless plays nowhere, so this only keeps the page's log clean.
  'media.autoplay.default': 0,
  // Diagnostics only: real host addresses in the offer and in getStats' local candidates instead of
  // random mDNS names (<uuid>.local). The server never resolves them (ICE-lite, it answers the checks).
  'media.peerconnection.ice.obfuscate_host_addresses': false,
};

/**
 * Headless firefox-esr with a fresh temporary profile (puppeteer creates and deletes it) and FIREFOX_PREFS
 * (+ `prefs`). Returns a puppeteer Browser; always browser.close() it.
 */
export async function launchFirefox({ prefs = {}, timeoutMs = 30_000, dumpio = false, acceptInsecureCerts = false } = {}) {
  if (!fs.existsSync(FIREFOX)) throw new Error(`firefox not found at ${FIREFOX} (apt-get install firefox-esr, or set FIREFOX_BIN)`);
  const browser = await puppeteer.launch({
    browser: 'firefox',
    protocol: 'webDriverBiDi',
    executablePath: FIREFOX,
    headless: true,
    timeout: timeoutMs,
    extraPrefsFirefox: { ...FIREFOX_PREFS, ...prefs },
    acceptInsecureCerts, // LAN mode's self-signed certificate (lan.test.mjs)
    dumpio, // Firefox's stdout/stderr into ours, for debugging a launch
  });
  // puppeteer kills Firefox (its own process group) on close and on this process' exit/SIGINT/SIGTERM; a
  // detached watchdog also kills it if this process dies by SIGKILL (as harness.mjs does for the server).
  const pid = browser.process()?.pid;
  if (pid) {
    spawn(
      '/bin/sh',
      ['-c', `while kill -0 ${process.pid} 2>/dev/null && kill -0 ${pid} 2>/dev/null; do sleep 1; done; kill -0 ${process.pid} 2>/dev/null || kill -9 -${pid} ${pid} 2>/dev/null; true`],
      { detached: true, stdio: 'ignore' },
    ).unref();
  }
  return browser;
}

/**
 * A fresh browser context + page on `url`, with console/page errors and HTTP failures captured into
 * `consoleLines` (like harness.mjs's openPage). Close with `context.close()` (or browser.close()).
 */
export async function openFirefoxPage(browser, url, { timeoutMs = 15_000 } = {}) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  const consoleLines = capturePageLog(page);
  await page.goto(url, { waitUntil: 'load', timeout: timeoutMs });
  return { context, page, consoleLines };
}

/**
 * Playwright-style waitForFunction(fn, arg, {timeoutMs, polling}) on a puppeteer page (whose own order is
 * fn, options, ...args): resolves to the truthy value fn returned (as JSON), throws a TimeoutError after
 * timeoutMs. Polls every `polling` ms like the harness's Playwright waits (puppeteer's default is 'raf').
 */
export async function waitForPage(page, fn, arg, { timeoutMs = 10_000, polling = 50 } = {}) {
  const handle = await page.waitForFunction(fn, { timeout: timeoutMs, polling }, arg);
  try {
    return await handle.jsonValue();
  } finally {
    await handle.dispose().catch(() => {});
  }
}

// harness.mjs's snapshots only use page.evaluate(fn), which puppeteer has with the same meaning, and
// Firefox's getStats() has the fields they read (transport.selectedCandidatePairId included), so they are
// reused as they are.
/** Snapshot of window.voiceEdge (state, timings, path, events, pc states) — harness.mjs's pageState. */
export const firefoxPageState = pageState;
/** The demo call's getStats essentials + SDPs — harness.mjs's rtcStats. */
export const firefoxRtcStats = rtcStats;

/**
 * Remote audio of the RTCPeerConnection at window.<pcPath> (default the demo's voiceEdge.pc; plain pages
 * use rt.pc): {packetsReceived, bytesReceived, totalAudioEnergy, audioLevel, totalSamplesReceived} or null.
 */
export function inboundAudioStats(page, pcPath = 'voiceEdge.pc') {
  return page.evaluate(async (p) => {
    const pc = p.split('.').reduce((o, k) => (o == null ? o : o[k]), window);
    if (!pc) return null;
    let out = null;
    (await pc.getStats()).forEach((s) => {
      if (s.type === 'inbound-rtp' && s.kind === 'audio') {
        out = {
          packetsReceived: s.packetsReceived ?? 0,
          bytesReceived: s.bytesReceived ?? 0,
          totalAudioEnergy: s.totalAudioEnergy ?? null,
          audioLevel: s.audioLevel ?? null,
          totalSamplesReceived: s.totalSamplesReceived ?? null,
        };
      }
    });
    return out;
  }, pcPath);
}

/**
 * One call on the demo page in Firefox: Start, wait until connected, 1.5 s of the fake microphone's tone,
 * then end the turn from the page (input_audio_buffer.commit + response.create: the tone never pauses, so
 * server VAD would not) and wait for the reply's audio. Returns the page state; throws on failure.
 */
export async function firefoxDemoTurn(page, { sleepMs = 1500 } = {}) {
  await page.click('#start');
  await waitForPage(page, () => window.voiceEdge.timings.dataChannelOpen != null || window.voiceEdge.state === 'failed', null, {
    timeoutMs: 15_000,
  });
  let st = await pageState(page);
  if (st.state !== 'connected') throw new Error(`page state ${st.state}: ${st.error}`);
  await waitForPage(page, () => window.voiceEdge.events.includes('session.updated'), null, { timeoutMs: 5_000 });
  await new Promise((r) => setTimeout(r, sleepMs));
  await page.evaluate(() => {
    for (const type of ['input_audio_buffer.commit', 'response.create']) window.voiceEdge.dc.send(JSON.stringify({ type }));
  });
  await waitForPage(page, () => window.voiceEdge.events.includes('output_audio_buffer.stopped') || window.voiceEdge.state === 'failed', null, {
    timeoutMs: 15_000,
  });
  await waitForPage(page, () => window.voiceEdge.timings.firstAudio != null, null, { timeoutMs: 3_000 });
  return pageState(page);
}
