// End to end: Debian's chromium (headless, fake microphone playing fixtures/speech.wav) opens the demo page,
// presses Start, and must get the echo back through relay and transceiver.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/*.test.mjs   (or tests/e2e/ on Node <= 20)
//
// VOICE_EDGE_BIN is resolved from the repository root; CHROMIUM_BIN overrides /usr/bin/chromium.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  STEPS,
  diagnostics,
  launchBrowser,
  openDemo,
  pageState,
  rtcStats,
  startCallAndWaitForAudio,
  startServer,
  timingsLine,
} from './harness.mjs';

const TEST_TIMEOUT_MS = 60_000;

describe('demo page in headless chromium', { timeout: TEST_TIMEOUT_MS + 30_000 }, () => {
  let server = null;
  let browser = null;
  let ctx = null; // {context, page, consoleLines}

  before(async () => {
    server = await startServer({ readyMs: 30_000 });
    browser = await launchBrowser();
  });

  after(async () => {
    // Always clean up, even when before() or the test failed half-way.
    if (ctx) await ctx.context.close().catch(() => {});
    if (browser) await browser.close().catch(() => {});
    if (server) await server.stop().catch(() => {});
  });

  test('Start → echoed audio comes back through the relay, path and events shown', { timeout: TEST_TIMEOUT_MS }, async () => {
    try {
      ctx = await openDemo(browser, server.baseUrl);
      const { page } = ctx;

      assert.equal(await page.title(), 'voice-edge demo');
      assert.equal((await pageState(page))?.state, 'idle', 'page exposes window.voiceEdge in state idle');

      const st = await startCallAndWaitForAudio(page, { timeoutMs: 20_000 });

      // Audio really came back: remote inbound-rtp audio with packets and energy.
      const stats = await rtcStats(page);
      assert.ok(stats && stats.inbound, `no remote inbound-rtp audio in getStats: ${JSON.stringify(stats)}`);
      assert.ok(stats.inbound.packetsReceived > 0, `inbound-rtp packetsReceived = ${stats.inbound.packetsReceived}`);
      assert.ok(stats.inbound.totalAudioEnergy > 0, `inbound-rtp totalAudioEnergy = ${stats.inbound.totalAudioEnergy}`);

      // The answer is ICE-lite with exactly one UDP candidate: the relay the server was started with.
      // (A component-2 line for the same address is tolerated: it is redundant under a=rtcp-mux, but
      // still the same single transport address.)
      const candidates = (stats.answerSdp || '')
        .split(/\r?\n/)
        .filter((l) => l.startsWith('a=candidate:'))
        .map((line) => {
          const [foundation, component, proto, , addr, port, , type] = line.slice('a=candidate:'.length).split(' ');
          return { line, foundation, component, proto: proto.toLowerCase(), addr: `${addr}:${port}`, type };
        });
      const listing = candidates.map((c) => c.line).join('\n');
      const rtp = candidates.filter((c) => c.component === '1');
      assert.equal(rtp.length, 1, `answer must carry exactly one RTP candidate:\n${listing}`);
      for (const c of candidates) {
        assert.equal(c.proto, 'udp', `non-UDP candidate in the answer: ${c.line}`);
        assert.equal(c.addr, server.relayAddr, `answer candidate is not the relay ${server.relayAddr}: ${c.line}`);
      }
      assert.match(stats.answerSdp, /^a=ice-lite\r?$/m, 'answer is ICE-lite');
      // ...and the media path the browser selected goes to that relay.
      if (stats.remoteCandidate && stats.remoteCandidate.port) {
        assert.equal(`${stats.remoteCandidate.address}:${stats.remoteCandidate.port}`, server.relayAddr, 'selected remote candidate');
      }

      // The page shows the path: relay address we started the server with, a cluster and a transceiver.
      const shown = await page.evaluate(() =>
        Object.fromEntries([...document.querySelectorAll('[data-path]')].map((e) => [e.dataset.path, e.textContent.trim()])),
      );
      assert.equal(st.path.relay, server.relayAddr, 'window.voiceEdge.path.relay');
      assert.match(String(st.path.worker), /^\d+$/, 'window.voiceEdge.path.worker');
      assert.equal(shown.relay, server.relayAddr, 'relay shown on the page');
      for (const k of ['cluster', 'transceiver', 'worker', 'callId']) {
        assert.ok(st.path[k] != null && st.path[k] !== '', `path.${k} missing: ${JSON.stringify(st.path)}`);
        assert.equal(shown[k], String(st.path[k]), `${k} shown on the page`);
      }

      // Data channel events: session.created on open, session.updated for our session.update.
      await page
        .waitForFunction(() => window.voiceEdge.events.includes('session.updated'), null, { timeout: 5_000 })
        .catch(() => {});
      const { events, timings } = await pageState(page);
      assert.ok(events.includes('session.created'), `events: ${JSON.stringify(events)}`);
      assert.ok(events.includes('session.updated'), `events: ${JSON.stringify(events)}`);

      // All six setup steps measured, and rendered.
      for (const s of STEPS) assert.equal(typeof timings[s], 'number', `timings.${s} = ${timings[s]}`);
      const rendered = await page.$$eval('[data-step]', (els) => els.map((e) => [e.dataset.step, e.dataset.ms]));
      for (const [step, ms] of rendered) assert.ok(ms !== undefined, `step ${step} not rendered`);

      console.log(`e2e timings (ms since Start): ${timingsLine(timings)}`);
      console.log(
        `e2e inbound audio: ${stats.inbound.packetsReceived} packets, totalAudioEnergy ${stats.inbound.totalAudioEnergy}; ` +
          `path relay=${st.path.relay} cluster=${st.path.cluster} transceiver=${st.path.transceiver}.${st.path.worker} call=${st.path.callId}`,
      );

      // Hang up: the page ends the call (closes pc, POSTs hangup).
      await page.click('#stop');
      await page.waitForFunction(() => window.voiceEdge.state === 'ended', null, { timeout: 5_000 });
      assert.equal(await page.evaluate(() => window.voiceEdge.pc.connectionState), 'closed');
      const hangup = await page
        .waitForFunction(() => window.voiceEdge.hangup, null, { timeout: 5_000 })
        .then((h) => h.jsonValue());
      assert.ok(hangup.ok, `POST ${'/v1/realtime/calls/' + st.path.callId}/hangup → ${JSON.stringify(hangup)}`);
    } catch (err) {
      const diag = await diagnostics({ page: ctx?.page, consoleLines: ctx?.consoleLines, server }).catch((e) => `(diagnostics failed: ${e})`);
      console.error(`\n===== e2e failure diagnostics =====\n${diag}\n===== end diagnostics =====\n`);
      throw err;
    }
  });
});
