// The demo page's codec picker and sideband pane, in headless chromium: PCMU picked → the offer limited
// to it (setCodecPreferences), the answer and getStats show PCMU, the echo's audio comes back; "Attach
// sideband" opens GET /v1/realtime?call_id= on the call, a session.update + response.create sent from
// its box is answered on both the sideband and the data channel (the same response, in the inspector and
// the conversation, and heard on the page); hang-up → the server closes the sideband (1000 "call ended")
// and the pane says so. Opus (the default) and PCMA shown as negotiated too; Detach closes a sideband.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/demo-sideband.test.mjs
//
// VOICE_EDGE_DEMO_WEB=web serves the page from disk in front of the binary (harness.mjs webFront).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT, diagnostics, launchBrowser, openDemo, startCallAndWaitForAudio, startServer, webFront } from './harness.mjs';

// One sentence, then 6.5 s of silence: one echo turn per loop.
const TURN_WAV = path.join(REPO_ROOT, 'fixtures', 'turn.wav');
const SAY = 'Hello from the sideband, in G.711.';

/** The inbound audio's energy and packet count (getStats). */
function inbound(page) {
  return page.evaluate(async () => {
    let s = null;
    (await window.voiceEdge.pc.getStats()).forEach((x) => {
      if (x.type === 'inbound-rtp' && x.kind === 'audio') s = x;
    });
    return { energy: s?.totalAudioEnergy ?? 0, packets: s?.packetsReceived ?? 0 };
  });
}

describe('demo page: codec picker and sideband pane in headless chromium', { timeout: 180_000 }, () => {
  let server = null;
  let front = null;
  let pageUrl = null;
  let browser = null;

  before(async () => {
    server = await startServer({ readyMs: 30_000 });
    pageUrl = server.baseUrl;
    if (process.env.VOICE_EDGE_DEMO_WEB) {
      front = await webFront(process.env.VOICE_EDGE_DEMO_WEB, server.baseUrl);
      pageUrl = front.url;
    }
    browser = await launchBrowser({ audioFile: TURN_WAV });
  });

  after(async () => {
    if (browser) await browser.close().catch(() => {});
    if (front) front.close();
    if (server) await server.stop().catch(() => {});
  });

  /** Run `fn(ctx)` on a fresh demo page; on failure print the page's and server's diagnostics. */
  async function withPage(fn) {
    const ctx = await openDemo(browser, pageUrl);
    try {
      return await fn(ctx);
    } catch (err) {
      const extra = await ctx.page
        .evaluate(() => ({
          codec: window.voiceEdge.codec,
          sideband: { ...window.voiceEdge.sideband, log: (window.voiceEdge.sideband?.log || []).map((r) => `${Math.round(r.t)} ${r.dir} ${r.type}`) },
          log: (window.voiceEdge.log || []).map((r) => `${Math.round(r.t)} ${r.dir} ${r.type}`),
          conversation: window.voiceEdge.conversation,
        }))
        .catch((e) => `(could not read page: ${e.message})`);
      const diag = await diagnostics({ page: ctx.page, consoleLines: ctx.consoleLines, server }).catch((e) => `(diagnostics failed: ${e})`);
      console.error(`\n===== demo sideband failure diagnostics =====\npanes: ${JSON.stringify(extra, null, 1)}\n${diag}\n===== end diagnostics =====\n`);
      throw err;
    } finally {
      await ctx.page.click('#stop', { timeout: 2_000 }).catch(() => {});
      await ctx.context.close().catch(() => {});
    }
  }

  test('PCMU: negotiated and heard; a sideband sends session.update + response.create, both panes see the response; hang-up closes it', { timeout: 90_000 }, async () => {
    await withPage(async ({ page }) => {
      assert.equal(await page.inputValue('#codec'), 'opus', 'Opus is the default');
      assert.equal(await page.isDisabled('#sideband-attach'), true, 'no sideband before a call');
      await page.selectOption('#codec', 'pcmu');
      await startCallAndWaitForAudio(page, { timeoutMs: 20_000 });

      // The offer had PCMU alone; the answer and the received audio are PCMU, and the page says so.
      await page.waitForFunction(() => window.voiceEdge.codec.stats, null, { timeout: 5_000 });
      const codec = await page.evaluate(() => ({ ...window.voiceEdge.codec, offer: window.voiceEdge.pc.localDescription.sdp }));
      const offerLine = codec.offer.split('\r\n').find((l) => l.startsWith('m=audio'));
      assert.ok(!/opus/i.test(codec.offer), `the offer still has Opus: ${offerLine}`);
      assert.equal(codec.asked, 'pcmu');
      assert.equal(codec.answer, 'PCMU/8000');
      assert.equal(codec.stats, 'audio/PCMU');
      assert.equal(await page.textContent('#codec-shown'), 'PCMU/8000 in the answer · audio/PCMU received (getStats)');

      // The echo's turn ends before the sideband steps in (the fake microphone says its sentence again
      // about 10 s after it started).
      await page.waitForFunction(() => window.voiceEdge.events.includes('output_audio_buffer.stopped'), null, { timeout: 25_000 });

      // Attach: session.created first, with the call's session (PCMU out).
      await page.click('#sideband-attach');
      await page.waitForFunction(() => window.voiceEdge.sideband.events.includes('session.created'), null, { timeout: 5_000 });
      const sb0 = await page.evaluate(() => ({ ...window.voiceEdge.sideband, log: undefined }));
      assert.equal(sb0.state, 'open');
      assert.equal(sb0.protocol, 'realtime', 'the server echoes the realtime sub-protocol');
      assert.equal(sb0.events[0], 'session.created', `first sideband event: ${sb0.events.join(', ')}`);
      const created = await page.evaluate(() => window.voiceEdge.sideband.log.find((r) => r.type === 'session.created').event);
      assert.equal(created.session.audio.output.format.type, 'audio/pcmu', JSON.stringify(created.session.audio));
      assert.match(await page.textContent('#sideband-status'), /^attached/);
      assert.equal(await page.isDisabled('#sideband-attach'), true, 'attach once');

      // From the pane's box: turn detection off (the microphone's next sentence must not cut the reply
      // short), then a response that says SAY.
      const pageDone0 = await page.evaluate(() => window.voiceEdge.events.length);
      const energy0 = (await inbound(page)).energy;
      await page.fill(
        '#sideband-json',
        JSON.stringify([
          { type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } },
          { type: 'response.create', response: { instructions: SAY } },
        ]),
      );
      await page.click('#sideband-send');
      assert.equal(await page.textContent('#sideband-status'), 'sent session.update, response.create');

      // The sideband gets the response.done of the response it asked for...
      const sbDone = await page
        .waitForFunction(
          (say) => window.voiceEdge.sideband.log.find((r) => r.dir === 'in' && r.type === 'response.done' && JSON.stringify(r.event).includes(say))?.event,
          SAY,
          { timeout: 15_000 },
        )
        .then((h) => h.jsonValue());
      assert.equal(sbDone.response.status, 'completed', JSON.stringify(sbDone.response));
      const sbTypes = await page.evaluate(() => window.voiceEdge.sideband.events);
      assert.ok(sbTypes.includes('session.updated'), `sideband events: ${sbTypes.join(', ')}`);
      // ...and its pane lists it, with what it sent.
      await page.waitForSelector('#sideband-events li[data-dir="in"][data-type="response.done"]', { timeout: 2_000 });
      for (const sel of ['li[data-dir="out"][data-type="session.update"]', 'li[data-dir="out"][data-type="response.create"]', 'li[data-dir="in"][data-type="session.created"]']) {
        assert.ok(await page.$(`#sideband-events ${sel}`), `sideband pane lacks ${sel}`);
      }

      // The page's data channel saw the same response: in the inspector (record and row) and the conversation.
      await page.waitForFunction((id) => window.voiceEdge.log.some((r) => r.dir === 'in' && r.type === 'response.done' && r.event.response?.id === id), sbDone.response.id, {
        timeout: 5_000,
      });
      const mainTypes = await page.evaluate((n) => window.voiceEdge.events.slice(n), pageDone0);
      assert.ok(mainTypes.includes('session.updated'), `the page's data channel after the send: ${mainTypes.join(', ')}`);
      assert.ok(mainTypes.includes('response.created'), `the page's data channel after the send: ${mainTypes.join(', ')}`);
      await page.waitForSelector('#events li[data-type="response.done"]', { timeout: 2_000 });
      const notes = await page.evaluate(() => window.voiceEdge.log.filter((r) => r.dir === 'note').map((r) => r.type));
      assert.ok(notes.includes('sideband sent response.create'), `inspector notes: ${notes.join(', ')}`);
      const conv = await page.evaluate(() => window.voiceEdge.conversation);
      const said = conv.find((e) => e.role === 'assistant' && e.final && e.text === SAY);
      assert.ok(said, `the conversation lacks the sideband's response: ${JSON.stringify(conv)}`);
      assert.equal(await page.textContent(`#conversation [data-item-id="${said.id}"] .text`), SAY);

      // And it is heard on the page, in PCMU.
      await page.waitForFunction((n) => window.voiceEdge.events.slice(n).includes('output_audio_buffer.stopped'), pageDone0, { timeout: 15_000 });
      const after = await inbound(page);
      assert.ok(after.energy > energy0, `audio energy ${energy0} → ${after.energy}`);
      assert.equal(await page.evaluate(() => window.voiceEdge.codec.stats), 'audio/PCMU');

      // Hang up: the server closes the sideband with the call, and the pane says so.
      await page.click('#stop');
      await page.waitForFunction(() => window.voiceEdge.sideband.state === 'closed', null, { timeout: 5_000 });
      const close = await page.evaluate(() => window.voiceEdge.sideband.close);
      assert.deepEqual(close, { code: 1000, reason: 'call ended', wasClean: true });
      assert.equal(await page.textContent('#sideband-status'), 'closed: 1000 "call ended"');
      await page.waitForSelector('#sideband-events li[data-dir="note"][data-type^="closed: 1000"]', { timeout: 2_000 });
      assert.equal(await page.isDisabled('#sideband-attach'), true, 'no attach after the call');
      assert.equal(await page.isDisabled('#sideband-send'), true, 'no send after the close');
      console.log(
        `demo sideband: PCMU call, ${sbTypes.length} sideband events, response ${sbDone.response.id} "${SAY}" on both, ` +
          `energy ${energy0.toFixed(3)} → ${after.energy.toFixed(3)}, closed ${close.code} "${close.reason}"`,
      );
    });
  });

  for (const [codec, answer, stats] of [
    ['opus', 'opus/48000', 'audio/opus'],
    ['pcma', 'PCMA/8000', 'audio/PCMA'],
  ]) {
    test(`codec picker: ${codec} negotiated and shown`, { timeout: 40_000 }, async () => {
      await withPage(async ({ page }) => {
        await page.selectOption('#model', 'loopback');
        await page.selectOption('#codec', codec);
        await startCallAndWaitForAudio(page, { timeoutMs: 20_000 });
        await page.waitForFunction(() => window.voiceEdge.codec.stats, null, { timeout: 5_000 });
        const got = await page.evaluate(() => window.voiceEdge.codec);
        assert.deepEqual(got, { asked: codec, answer, stats });
        assert.equal(await page.textContent('#codec-shown'), `${answer} in the answer · ${stats} received (getStats)`);
        if (codec !== 'opus') return;
        // Detach: the page closes its sideband; the call goes on.
        await page.click('#sideband-attach');
        await page.waitForFunction(() => window.voiceEdge.sideband.state === 'open', null, { timeout: 5_000 });
        await page.click('#sideband-detach');
        await page.waitForFunction(() => window.voiceEdge.sideband.state === 'closed', null, { timeout: 5_000 });
        const close = await page.evaluate(() => window.voiceEdge.sideband.close);
        assert.equal(close.code, 1000, JSON.stringify(close));
        assert.match(await page.textContent('#sideband-status'), /^closed: 1000/);
        assert.equal(await page.evaluate(() => window.voiceEdge.state), 'connected', 'the call outlives its sideband');
        assert.equal(await page.isDisabled('#sideband-attach'), false, 'attach again');
      });
    });
  }
});
