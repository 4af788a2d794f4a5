// OpenAI's Live WebRTC flow in headless chromium against voice-edge: the plain flow of the Live guide (fetch +
// RTCPeerConnection, live-page.mjs) and the `openai` package's own browser helper (OpenAILiveWebRTC from
// 'openai/lib/live/webrtc', live-sdk.page.mjs). The pages are served from another loopback origin, so the POST
// to /v1/live/sessions is a real cross-origin request. Fake microphone: fixtures/bargein.wav (a sentence, a
// pause in which the model answers, a second sentence that talks over that answer; chromium loops it).
//
// Checks: 201 with a live_ id, session.started first, a spoken turn answered with audio and with input and
// output transcript deltas without any client command, the talking-over counted as a barge-in by the server
// (which stopped the output), session.close → session.closed and the channel closing, and every server event
// against the `ServerEvent` union of the package's resources/live/live.d.ts. Then the demo page with its API
// switch on Live: a spoken turn shows in the conversation pane, hang-up ends the session.
//
// Editing web/ without rebuilding: VOICE_EDGE_DEMO_WEB=web serves the page from that directory.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/live-flow.test.mjs
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT, launchBrowser, openPage, pageState, serverDiagnostics, startCallAndWaitForAudio, startServer, webFront } from './harness.mjs';
import { adminCalls, bundleBrowserEntry, findCall, inboundAudio, pageEvents, sleep, startStaticServer, waitForEvent } from './realtime-util.mjs';
import { LIVE_PAGE_HTML, LIVE_SDK_PAGE_HTML } from './live-page.mjs';
import { LIVE_DTS, assertServerEventShapes } from './openai-types.mjs';
import { openEventSocket } from './realtime-ws.mjs';

const BARGEIN_WAV = path.join(REPO_ROOT, 'fixtures', 'bargein.wav');

/** Output transcript text and input transcript text the page received. */
function transcripts(events) {
  const join = (type) => events.filter((e) => e.type === type).map((e) => e.delta).join('');
  return { input: join('session.input_transcript.delta'), output: join('session.output_transcript.delta') };
}

async function waitFor(what, fn, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

describe('Live WebRTC flow in headless chromium', { timeout: 180_000 }, () => {
  let server = null;
  let pages = null;
  let browser = null;
  let front = null;
  const contexts = [];

  before(async () => {
    const [srv, bundle] = await Promise.all([startServer({ readyMs: 30_000 }), bundleBrowserEntry('live-sdk.page.mjs')]);
    server = srv;
    pages = await startStaticServer({
      '/': { type: 'text/html; charset=utf-8', body: LIVE_PAGE_HTML },
      '/sdk.html': { type: 'text/html; charset=utf-8', body: LIVE_SDK_PAGE_HTML },
      '/sdk.js': { type: 'text/javascript; charset=utf-8', body: bundle },
    });
    browser = await launchBrowser({ audioFile: BARGEIN_WAV });
    if (process.env.VOICE_EDGE_DEMO_WEB) front = await webFront(process.env.VOICE_EDGE_DEMO_WEB, server.baseUrl);
  });

  after(async () => {
    for (const c of contexts) await c.context.close().catch(() => {});
    if (browser) await browser.close().catch(() => {});
    if (pages) await pages.close().catch(() => {});
    if (front) front.close();
    if (server) await server.stop().catch(() => {});
  });

  test('plain flow: model-owned turns, transcripts, barge-in, session.close', { timeout: 70_000 }, async () => {
    const ctx = await openPage(browser, `${pages.origin}/`);
    contexts.push(ctx);
    const { page } = ctx;
    try {
      const baseUrl = server.baseUrl.replace(/\/$/, '');
      const created = await page.evaluate((o) => window.startLive(o), {
        baseUrl,
        session: { model: 'gpt-live-1', instructions: 'Echo the caller.', audio: { output: { voice: 'marin' } } },
      });
      assert.equal(created.status, 201);
      assert.match(created.body.session.id, /^live_/);
      assert.equal(created.body.transportType, 'webrtc');
      assert.equal(created.location, `/v1/live/sessions/${created.body.session.id}`, 'Location readable cross-origin');
      const first = (await pageEvents(page)).events[0];
      assert.equal(first.type, 'session.started', 'session.started is the first event');
      assert.equal(first.session.id, created.body.session.id);
      assert.equal(first.session.instructions, 'Echo the caller.');

      // The first sentence, a pause: the model answers on its own, with audio and both transcripts.
      await waitForEvent(page, { type: 'session.input_transcript.delta' }, { timeoutMs: 15_000 });
      await waitForEvent(page, { type: 'session.output_transcript.delta' }, { timeoutMs: 10_000 });
      const audio = await waitFor('audio from the model', async () => {
        const a = await inboundAudio(page);
        return a && a.packetsReceived > 50 && a.totalAudioEnergy > 0 ? a : null;
      }, 10_000);
      // The second sentence talks over the answer: the server stops the output and counts it.
      const call = await waitFor('a barge-in on the server', async () => {
        const c = findCall(await adminCalls(server), created.body.session.id);
        return c && c.voice && c.voice.barge_ins >= 1 ? c : null;
      }, 20_000);
      const { events } = await pageEvents(page);
      const { input, output } = transcripts(events);
      console.log(
        `live plain flow: ${audio.packetsReceived} audio packets; input "${input}"; output "${output}"; ` +
          `barge-in stopped output ${call.voice.barge_in_ms} ms after speech onset; turn ${call.voice.turn_ms} ms`,
      );
      assert.match(input, /\[speech, \d+\.\d s\]/);
      assert.match(output, /^Echoing/, 'the answer began (and was cut short by the talking-over)');
      for (const e of events.filter((e) => e.type.endsWith('_transcript.delta'))) {
        assert.ok(Number.isInteger(e.start_ms) && e.end_ms >= e.start_ms, `timeline of ${JSON.stringify(e)}`);
      }

      await page.evaluate(() => window.sendEvent({ type: 'session.close', event_id: 'bye' }));
      const closed = await waitForEvent(page, { type: 'session.closed' }, { timeoutMs: 5_000 });
      assert.equal(closed.event.reason, 'close_requested');
      assert.equal(closed.event.client_event_id, 'bye');
      assert.ok(closed.event.usage.seconds > 3, `usage ${JSON.stringify(closed.event.usage)}`);
      await waitFor('the data channel to close', () => page.evaluate(() => window.rt.closed !== null), 10_000);
      assertServerEventShapes(assert, (await pageEvents(page)).events.map(({ t, ...e }) => e), 'live plain flow', LIVE_DTS);
    } catch (e) {
      console.log(await serverDiagnostics(server));
      console.log((await pageEvents(page).catch(() => ({ events: [] }))).events.map((e) => e.type).join(' '));
      console.log(ctx.consoleLines.join('\n'));
      throw e;
    }
  });

  test('OpenAILiveWebRTC (openai/lib/live/webrtc): connect, a turn, session.close', { timeout: 60_000 }, async () => {
    const ctx = await openPage(browser, `${pages.origin}/sdk.html`);
    contexts.push(ctx);
    const { page } = ctx;
    try {
      await page.waitForFunction(() => typeof window.startLiveSdk === 'function', null, { timeout: 10_000 });
      const baseUrl = server.baseUrl.replace(/\/$/, '');
      const res = await page.evaluate((o) => window.startLiveSdk(o), { baseUrl, session: { model: 'echo' } });
      assert.equal(res.state, 'connected', 'the helper reports connected');
      assert.equal(res.created.status, 201);
      await waitForEvent(page, { type: 'session.output_transcript.delta' }, { timeoutMs: 20_000 });
      await page.evaluate(() => window.sendEvent({ type: 'session.input_audio.mute', event_id: 'mute-1' }));
      await waitForEvent(page, { type: 'session.input_audio.muted', client_event_id: 'mute-1' }, { timeoutMs: 5_000 });
      await page.evaluate(() => window.sendEvent({ type: 'session.close' }));
      await waitForEvent(page, { type: 'session.closed', reason: 'close_requested' }, { timeoutMs: 5_000 });
      const lifecycle = await waitFor('the helper to report closed', async () => {
        const l = await page.evaluate(() => window.rt.lifecycle);
        return l.some((e) => e.type === 'closed') ? l : null;
      }, 15_000);
      console.log(`OpenAILiveWebRTC lifecycle: ${lifecycle.map((e) => `${e.type}:${e.state || e.reason}`).join(' → ')}`);
      assert.equal(lifecycle.find((e) => e.type === 'closed').reason, 'remote', 'the server ended the session');
      assertServerEventShapes(assert, (await pageEvents(page)).events.map(({ t, ...e }) => e), 'OpenAILiveWebRTC', LIVE_DTS);
    } catch (e) {
      console.log(await serverDiagnostics(server));
      console.log(ctx.consoleLines.join('\n'));
      throw e;
    }
  });

  test('an attach sideband hears session.closed (remote_hangup) when the browser hangs up, then closes', { timeout: 30_000 }, async () => {
    const ctx = await openPage(browser, `${pages.origin}/`);
    contexts.push(ctx);
    const { page } = ctx;
    let sb = null;
    try {
      const baseUrl = server.baseUrl.replace(/\/$/, '');
      const created = await page.evaluate((o) => window.startLive(o), { baseUrl, session: { model: 'gpt-live-1' } });
      const id = created.body.session.id;
      sb = await openEventSocket(`ws://${server.httpAddr}/v1/live/sessions/${id}/attach`, { headers: { Authorization: 'Bearer sk-test' } });
      await sb.waitFor({ type: 'session.started' }, { timeoutMs: 3_000 });
      // The call's audio is reflected to the sideband as the service does it: the caller's
      // microphone as session.input_audio.append, the model's answer as session.output_audio.delta
      // with its span, both 24 kHz PCM16.
      const pcm = (b64) => {
        const b = Buffer.from(b64, 'base64');
        return Array.from({ length: b.length / 2 }, (_, i) => b.readInt16LE(2 * i));
      };
      const loud = (b64) => Math.max(...pcm(b64).map(Math.abs)) > 1000;
      await waitFor('the caller\'s speech reflected', () => sb.events.some((e) => e.type === 'session.input_audio.append' && loud(e.audio)), 10_000);
      const out = await sb.waitFor({ type: 'session.output_audio.delta' }, { timeoutMs: 20_000 });
      assert.ok(Number.isInteger(out.event.start_ms) && out.event.end_ms > out.event.start_ms, JSON.stringify({ ...out.event, delta: '…' }));
      assert.equal(pcm(out.event.delta).length, (out.event.end_ms - out.event.start_ms) * 24, 'the span is the audio\'s length at 24 kHz');
      const inputs = sb.events.filter((e) => e.type === 'session.input_audio.append');
      assert.ok(inputs.every((e) => e.event_id === undefined && pcm(e.audio).length === 480), 'each caller frame reflected as 20 ms at 24 kHz, no event_id');
      console.log(`live sideband reflection: ${inputs.length} caller frames, first model frame at ${out.event.start_ms}-${out.event.end_ms} ms`);
      await page.evaluate(() => {
        window.rt.dc.close();
        window.rt.pc.close();
      });
      const closed = await sb.waitFor({ type: 'session.closed' }, { timeoutMs: 10_000 });
      assert.equal(closed.event.reason, 'remote_hangup', JSON.stringify(closed.event));
      const gone = await sb.waitClosed(10_000);
      assert.ok(gone, 'the sideband closes after session.closed');
      assert.notEqual(gone.code, 1006, 'a close frame, not a dropped connection');
      assertServerEventShapes(assert, sb.events.map(({ t, ...e }) => e), 'live sideband', LIVE_DTS);
    } catch (e) {
      console.log(`sideband events: ${JSON.stringify(sb?.events?.filter((x) => !x.type.includes('audio')).map((x) => x.type))}`);
      console.log(await serverDiagnostics(server));
      throw e;
    } finally {
      sb?.close?.();
    }
  });

  test('the demo page on Live: a spoken turn in the conversation pane, then hang-up', { timeout: 60_000 }, async () => {
    const ctx = await openPage(browser, front ? front.url : server.baseUrl);
    contexts.push(ctx);
    const { page } = ctx;
    try {
      await page.selectOption('#api', 'live');
      await page.selectOption('#model', 'echo');
      await startCallAndWaitForAudio(page);
      const conv = await waitFor('a user turn and an answer in the conversation pane', async () => {
        const c = await page.evaluate(() => window.voiceEdge.conversation);
        const user = c.find((e) => e.role === 'user' && e.text.includes('[speech'));
        const assistant = c.find((e) => e.role === 'assistant' && e.text.startsWith('Echoing'));
        return user && assistant ? c : null;
      }, 20_000);
      const st = await pageState(page);
      assert.equal(st.events[0], 'session.started', 'the first event of a Live call');
      assert.ok(!st.events.includes('session.created'), 'no Realtime events on a Live call');
      assert.match(st.path.callId, /^live_/);
      console.log(`demo on Live: ${conv.map((e) => `${e.role}: ${e.text}`).join(' | ')}`);
      await page.click('#stop');
      await waitFor('the hang-up', async () => (await adminCalls(server)).calls?.length === 0, 10_000);
    } catch (e) {
      console.log(await serverDiagnostics(server));
      console.log(ctx.consoleLines.join('\n'));
      throw e;
    }
  });
});
