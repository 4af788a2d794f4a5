#!/usr/bin/env node
// Setup timings of the demo page in Chromium and Firefox side by side (a script, not a test): one server
// with default media settings (--relay auto), N calls per browser, interleaved (the browser going first
// alternates per round, so a noisy moment hits both), and a markdown table of medians (min–max).
//
//   node tests/e2e/browser-timings.mjs [--runs 10] [--warmup 1] [--browsers chromium,firefox] [--relay auto|loopback]
//
// --relay loopback starts the server with the relay on 127.0.0.1 (Chromium only: Firefox cannot connect).
//
// "answer → connected" is the server's share of setup: from the answer arriving in the page to the peer
// connection's DTLS transport being up (ICE checks, then the DTLS handshake). Earlier steps are the
// browser's own (getUserMedia, createOffer) and HTTP.
import { parseArgs } from 'node:util';
import { diagnostics, fmt, launchBrowser, openDemo, startServer } from './harness.mjs';
import { launchFirefox, openFirefoxPage, waitForPage } from './firefox.mjs';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '1' },
    browsers: { type: 'string', default: 'chromium,firefox' },
    relay: { type: 'string', default: 'auto' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log('usage: node tests/e2e/browser-timings.mjs [--runs N] [--warmup N] [--browsers chromium,firefox] [--relay auto|loopback]');
  process.exit(0);
}
const runs = Number.parseInt(values.runs, 10);
const warmup = Number.parseInt(values.warmup, 10);
const names = values.browsers.split(',').map((s) => s.trim()).filter(Boolean);
if (!(runs > 0) || !(warmup >= 0) || names.some((n) => !['chromium', 'firefox'].includes(n)) || !['auto', 'loopback'].includes(values.relay)) {
  console.error('--runs > 0, --warmup >= 0, --browsers from chromium,firefox, --relay auto or loopback');
  process.exit(2);
}

// Each browser behind one small interface: open the demo, run a call up to the data channel, hang up.
const drivers = {
  chromium: {
    launch: () => launchBrowser(),
    open: (b, url) => openDemo(b, url),
    waitOpen: (page) =>
      page.waitForFunction(() => window.voiceEdge.timings.dataChannelOpen != null || window.voiceEdge.state === 'failed', null, {
        timeout: 15_000,
        polling: 20,
      }),
    waitEnded: (page) => page.waitForFunction(() => window.voiceEdge.state === 'ended', null, { timeout: 5_000 }),
  },
  firefox: {
    launch: () => launchFirefox(),
    open: (b, url) => openFirefoxPage(b, url),
    waitOpen: (page) =>
      waitForPage(page, () => window.voiceEdge.timings.dataChannelOpen != null || window.voiceEdge.state === 'failed', null, {
        timeoutMs: 15_000,
        polling: 20,
      }),
    waitEnded: (page) => waitForPage(page, () => window.voiceEdge.state === 'ended', null, { timeoutMs: 5_000 }),
  },
};

const median = (xs) => {
  const v = xs.filter((x) => typeof x === 'number').sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};
const spread = (xs) => {
  const v = xs.filter((x) => typeof x === 'number');
  return v.length ? `${fmt(median(v))} (${fmt(Math.min(...v))}–${fmt(Math.max(...v))})` : '–';
};

let server = null;
const browsers = {};
let exitCode = 0;
try {
  server = await startServer({ relay: values.relay });
  for (const n of names) browsers[n] = { d: drivers[n], b: await drivers[n].launch(), results: [], version: null };
  for (const n of names) {
    const v = await browsers[n].b.version();
    browsers[n].version = v.includes('/') ? v : `${n}/${v}`;
  }
  for (let i = 1 - warmup; i <= runs; i++) {
    const order = i % 2 ? names : [...names].reverse();
    for (const n of order) {
      const { d, b, results } = browsers[n];
      const ctx = await d.open(b, server.baseUrl);
      try {
        await ctx.page.click('#start');
        await d.waitOpen(ctx.page);
        const st = await ctx.page.evaluate(() => ({ state: window.voiceEdge.state, error: window.voiceEdge.error, t: window.voiceEdge.timings }));
        if (st.state === 'failed') throw new Error(`call failed: ${st.error}`);
        if (i > 0) results.push(st.t);
        process.stderr.write(`${n} ${i > 0 ? `run ${i}/${runs}` : 'warm-up'}: answer → connected ${fmt(st.t.dtlsConnected - st.t.answerReceived)} ms\n`);
        await ctx.page.click('#stop');
        await d.waitEnded(ctx.page);
      } catch (e) {
        console.error(`${n} run ${i} failed: ${e.message}\n${await diagnostics({ page: ctx.page, consoleLines: ctx.consoleLines, server })}`);
        throw e;
      } finally {
        await ctx.context.close().catch(() => {});
      }
    }
  }

  console.log(
    `Demo page setup, median (min–max) of ${runs} calls per browser, interleaved, media via the relay at ${server.relayAddr} ` +
      `(--relay ${values.relay}); ms`,
  );
  console.log('');
  const cols = [
    ['answer → ICE connected', (t) => t.iceConnected - t.answerReceived],
    ['answer → DTLS connected', (t) => t.dtlsConnected - t.answerReceived],
    ['answer → data channel open', (t) => t.dataChannelOpen - t.answerReceived],
    ['offer posted → answer', (t) => t.answerReceived - t.offerPosted],
    ['Start → data channel open', (t) => t.dataChannelOpen],
  ];
  console.log(`| browser | ${cols.map((c) => c[0]).join(' | ')} |`);
  console.log(`|---|${cols.map(() => '---:').join('|')}|`);
  for (const n of names) {
    const { results, version } = browsers[n];
    console.log(`| ${version} | ${cols.map(([, f]) => spread(results.map(f))).join(' | ')} |`);
  }
} catch (e) {
  console.error(e && e.stack ? e.stack : String(e));
  exitCode = 1;
} finally {
  for (const { b } of Object.values(browsers)) await b.close().catch(() => {});
  if (server) await server.stop().catch(() => {});
}
process.exit(exitCode);
