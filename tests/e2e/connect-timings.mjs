#!/usr/bin/env node
// Connect-time measurement (a script, not a test): runs the demo flow N times against one server in headless
// chromium and prints a markdown table of each setup step per run, plus the median.
//
//   node tests/e2e/connect-timings.mjs [--runs 5] [--warmup 0] [--url http://127.0.0.1:8080/]
//
// --warmup N does N calls first that are not counted (the browser's first getUserMedia opens the fake capture
// device, which costs ~100-200 ms that have nothing to do with the server).
// Without --url it starts ${VOICE_EDGE_BIN:-target/x86_64-unknown-linux-gnu/release/voice-edge} on free ports (path relative to the
// repo root). Each run uses a fresh browser context (new page, new RTCPeerConnection) in one browser.
import { parseArgs } from 'node:util';
import { STEPS, diagnostics, fmt, launchBrowser, openDemo, startCallAndWaitForAudio, startServer } from './harness.mjs';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '0' },
    url: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log('usage: node tests/e2e/connect-timings.mjs [--runs N] [--warmup N] [--url http://host:port/]');
  process.exit(0);
}
const runs = Number.parseInt(values.runs, 10);
const warmup = Number.parseInt(values.warmup, 10);
if (!(runs > 0) || !(warmup >= 0)) {
  console.error(`--runs must be a positive integer and --warmup >= 0, got ${values.runs} / ${values.warmup}`);
  process.exit(2);
}

function median(xs) {
  const v = xs.filter((x) => typeof x === 'number').sort((a, b) => a - b);
  if (v.length === 0) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

let server = null;
let browser = null;
let exitCode = 0;
try {
  let baseUrl = values.url;
  if (!baseUrl) {
    server = await startServer();
    baseUrl = server.baseUrl;
  }
  browser = await launchBrowser();
  const results = [];
  let path = null;
  for (let i = 1 - warmup; i <= runs; i++) {
    const label = i <= 0 ? `warm-up ${i + warmup}/${warmup}` : `run ${i}/${runs}`;
    const ctx = await openDemo(browser, baseUrl);
    try {
      const st = await startCallAndWaitForAudio(ctx.page, { timeoutMs: 20_000 });
      if (i > 0) results.push(st.timings);
      path = st.path;
      process.stderr.write(`${label}: first audio at ${fmt(st.timings.firstAudio)} ms (transceiver ${st.path.transceiver})\n`);
      await ctx.page.click('#stop');
      await ctx.page.waitForFunction(() => window.voiceEdge.state === 'ended', null, { timeout: 5_000 });
      await ctx.page.waitForTimeout(100);
    } catch (e) {
      console.error(`${label} failed: ${e.message}\n${await diagnostics({ page: ctx.page, consoleLines: ctx.consoleLines, server })}`);
      throw e;
    } finally {
      await ctx.context.close().catch(() => {});
    }
  }

  const header = ['run', ...STEPS.map((s) => `${s} (ms)`)];
  const rows = results.map((t, i) => [String(i + 1), ...STEPS.map((s) => fmt(t[s]))]);
  rows.push(['**median**', ...STEPS.map((s) => `**${fmt(median(results.map((t) => t[s])))}**`)]);
  console.log(`Connect timings, ms since Start, ${runs} runs` + (warmup ? ` after ${warmup} warm-up call(s)` : '') +
    `, headless Chromium on ${baseUrl}` +
    (path ? ` (relay ${path.relay}, cluster ${path.cluster})` : ''));
  console.log('');
  console.log(`| ${header.join(' | ')} |`);
  console.log(`|${header.map(() => '---').join('|')}|`);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
} catch (e) {
  console.error(e && e.stack ? e.stack : String(e));
  exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  if (server) await server.stop().catch(() => {});
}
process.exit(exitCode);
