// The plain browser flow of OpenAI's Realtime WebRTC guide, no SDK: getUserMedia → RTCPeerConnection with
// the mic track and a data channel 'oai-events' → fetch(POST {base}/v1/realtime/calls, offer SDP,
// Authorization: Bearer ek_…) → setRemoteDescription(answer). The page is served from another loopback
// origin than voice-edge, so the fetch is a real cross-origin request (CORS preflight, exposed Location).
// Fake microphone: fixtures/turn.wav (1 s silence, one sentence, 6.5 s silence; chromium loops it).
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/plain-flow.test.mjs
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT, launchBrowser, openPage, serverDiagnostics, startServer } from './harness.mjs';
import {
  TURN_CYCLE,
  adminCalls,
  checkResponse,
  cycleTypes,
  eventDump,
  findCall,
  inboundAudio,
  mintClientSecret,
  pageEvents,
  sleep,
  startStaticServer,
  waitForEvent,
} from './realtime-util.mjs';
import { PLAIN_PAGE_HTML as HTML } from './plain-page.mjs';
import { assertServerEventShapes } from './openai-types.mjs';

const TURN_WAV = path.join(REPO_ROOT, 'fixtures', 'turn.wav');
const FILE_TIMEOUT_MS = 120_000;

describe('plain WebRTC flow (fetch + RTCPeerConnection, no SDK) in headless chromium', { timeout: FILE_TIMEOUT_MS }, () => {
  let server = null;
  let pages = null;
  let browser = null;
  let ctx = null;

  before(async () => {
    server = await startServer({ readyMs: 30_000 });
    pages = await startStaticServer({ '/': { type: 'text/html; charset=utf-8', body: HTML } });
    browser = await launchBrowser({ audioFile: TURN_WAV });
  });

  after(async () => {
    if (ctx) await ctx.context.close().catch(() => {});
    if (browser) await browser.close().catch(() => {});
    if (pages) await pages.close().catch(() => {});
    if (server) await server.stop().catch(() => {});
  });

  test('offer → answer cross-origin, session.created/updated, a spoken turn with audio back', { timeout: 60_000 }, async () => {
    try {
      const key = await mintClientSecret(server);
      console.log(`plain flow: page origin ${pages.origin}, voice-edge ${server.baseUrl}; key: ${key.note}`);
      ctx = await openPage(browser, `${pages.origin}/`);
      const { page } = ctx;
      const baseUrl = server.baseUrl.replace(/\/$/, '');
      const started = await Promise.race([
        page.evaluate((o) => window.startPlain(o), { baseUrl, key: key.key }),
        sleep(15_000).then(() => {
          throw new Error('offer/answer + data channel open did not finish within 15 s');
        }),
      ]);
      console.log(`plain flow: POST /v1/realtime/calls ${started.calls.status} in ${started.calls.ms.toFixed(0)} ms, data channel open after ${started.openMs.toFixed(0)} ms`);
      assert.equal(started.calls.status, 201, 'POST /v1/realtime/calls status');
      assert.match(String(started.calls.location), /\/v1\/realtime\/calls\/[^/\s]+$/, 'Location header readable cross-origin');

      // session.created on open; session.updated (full effective config) for our session.update.
      const created = await waitForEvent(page, { type: 'session.created' }, { timeoutMs: 5_000 });
      assert.equal(created.index, 0, 'session.created is the first server event');
      assert.equal(typeof created.event.event_id, 'string', 'event_id');
      assert.equal(typeof created.event.session?.id, 'string', 'session.id');
      const INSTRUCTIONS = 'Speak like a plain WebRTC test.';
      await page.evaluate(
        (instructions) =>
          window.sendEvent({
            type: 'session.update',
            session: {
              type: 'realtime',
              instructions,
              audio: {
                input: {
                  turn_detection: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500, create_response: true, interrupt_response: true },
                },
              },
            },
          }),
        INSTRUCTIONS,
      );
      const updated = await waitForEvent(page, { type: 'session.updated' }, { timeoutMs: 3_000 });
      assert.equal(updated.event.session?.instructions, INSTRUCTIONS, 'session.updated carries the new instructions');
      const td = updated.event.session?.audio?.input?.turn_detection;
      assert.equal(td?.type, 'server_vad', `turn_detection: ${JSON.stringify(td)}`);
      assert.equal(td?.silence_duration_ms, 500, 'silence_duration_ms');
      const audio0 = await inboundAudio(page);

      // A spoken turn from the fake microphone: the full event cycle, and its audio back.
      const speech = await waitForEvent(page, { type: 'input_audio_buffer.speech_started' }, { timeoutMs: 10_000 });
      const respCreated = await waitForEvent(page, { type: 'response.created' }, { from: speech.index, timeoutMs: 10_000 });
      const respId = respCreated.event.response.id;
      await waitForEvent(page, { type: 'output_audio_buffer.stopped', response_id: respId }, { from: respCreated.index, timeoutMs: 15_000 });
      const { events } = await pageEvents(page);
      assert.deepEqual(cycleTypes(events.slice(speech.index), TURN_CYCLE), TURN_CYCLE, 'event order of a spoken turn');
      const userItem = events.slice(speech.index).find((e) => e.type === 'conversation.item.added')?.item;
      assert.equal(userItem?.id, speech.event.item_id, 'user item id = speech_started.item_id');
      assert.equal(userItem?.content?.[0]?.type, 'input_audio');
      assert.ok('transcript' in userItem.content[0] && userItem.content[0].transcript === null, 'input_audio transcript: null');
      const reply = checkResponse(assert, events, respId);
      assert.match(reply.transcript, /^Echoing your \d+(\.\d+)? second turn\.?$/, 'echo transcript');
      for (const e of events) {
        assert.ok(e.textFrame, `${e.type} came as a binary frame`);
        assert.equal(typeof e.event_id, 'string', `${e.type} has a string event_id`);
      }
      assertServerEventShapes(assert, events, 'plain flow spoken turn');

      const audio1 = await inboundAudio(page);
      const ontrack = await page.evaluate(() => window.rt.ontrack);
      assert.ok(ontrack && ontrack.streams >= 1, `ontrack delivered the remote track in a stream (a=msid): ${JSON.stringify(ontrack)}`);
      assert.ok(audio1, 'inbound-rtp audio stats');
      assert.ok(audio1.packetsReceived > (audio0?.packetsReceived ?? 0), `packetsReceived ${audio0?.packetsReceived} → ${audio1.packetsReceived}`);
      assert.ok(audio1.totalAudioEnergy > (audio0?.totalAudioEnergy ?? 0), `totalAudioEnergy ${audio0?.totalAudioEnergy} → ${audio1.totalAudioEnergy}`);

      // The browser's RTCP on our audio reaches the call's record: loss and jitter as it sees them.
      const callId = started.calls.location?.split('/').pop();
      let call = findCall(await adminCalls(server), callId);
      for (let i = 0; i < 80 && !call?.client_report; i++) {
        await sleep(100);
        call = findCall(await adminCalls(server), callId);
      }
      const rr = call?.client_report;
      assert.ok(rr?.reports > 0, `no RTCP report from the browser in /admin/calls: ${JSON.stringify(call)}`);
      assert.ok(rr.packets_lost >= 0 && rr.fraction_lost >= 0 && rr.jitter_ms > 0 && rr.jitter_ms < 500, JSON.stringify(rr));
      console.log(
        `plain flow: spoken turn → "${reply.transcript}", ${audio1.packetsReceived} packets, energy ${audio1.totalAudioEnergy.toFixed(4)}; ` +
          `/admin/calls voice ${JSON.stringify(call?.voice ?? call)}, client RTCP ${JSON.stringify(rr)}`,
      );
    } catch (err) {
      const parts = [];
      if (ctx?.page) {
        try {
          const rt = await ctx.page.evaluate(() => ({
            events: window.rt.events,
            sent: window.rt.sent,
            calls: window.rt.calls,
            ontrack: window.rt.ontrack,
            pc: window.rt.pc && { connectionState: window.rt.pc.connectionState, iceConnectionState: window.rt.pc.iceConnectionState, answer: window.rt.pc.remoteDescription?.sdp },
            dc: window.rt.dc && window.rt.dc.readyState,
          }));
          parts.push(`calls: ${JSON.stringify(rt.calls)}, ontrack ${JSON.stringify(rt.ontrack)}, data channel ${rt.dc}`);
          parts.push(`pc: ${JSON.stringify({ ...rt.pc, answer: undefined })}\nanswer SDP:\n${rt.pc?.answer}`);
          parts.push(`server events (${rt.events.length}):\n${eventDump(rt.events)}`);
          parts.push(`client events sent (${rt.sent.length}):\n${eventDump(rt.sent)}`);
          parts.push(`inbound audio: ${JSON.stringify(await inboundAudio(ctx.page))}`);
        } catch (e) {
          parts.push(`(could not read page: ${e.message})`);
        }
        parts.push(`browser console (${ctx.consoleLines.length} lines):\n${ctx.consoleLines.join('\n')}`);
      }
      if (pages) parts.push(`page server requests: ${pages.requests.join(', ')}`);
      if (server) parts.push(await serverDiagnostics(server, { adminPaths: ['/admin/stats', '/admin/calls'] }));
      console.error(`\n===== plain-flow failure diagnostics =====\n${parts.join('\n\n')}\n===== end diagnostics =====\n`);
      throw err;
    }
  });
  test('ICE restart: restartIce() + PATCH with the new offer keeps the call and its audio', { timeout: 30_000 }, async () => {
    const key = await mintClientSecret(server);
    const rctx = await openPage(browser, `${pages.origin}/`);
    try {
      const { page } = rctx;
      const baseUrl = server.baseUrl.replace(/\/$/, '');
      // loopback: the server returns the mic's RTP at once, so audio is measurable any time.
      const started = await page.evaluate((o) => window.startPlain(o), { baseUrl, key: key.key, query: '?model=loopback' });
      assert.equal(started.calls.status, 201);
      const location = started.calls.location;
      const callId = location.split('/').pop();
      await sleep(500);
      const before = await inboundAudio(page);
      assert.ok(before?.packetsReceived > 0, `audio before the restart: ${JSON.stringify(before)}`);

      const r = await page.evaluate((o) => window.restartIce(o), { baseUrl, location });
      assert.equal(r.status, 200);
      assert.notEqual(r.newUfrag, r.oldUfrag, 'the browser took new ICE credentials');
      // ICE reconnects on the new credentials: Chromium keeps the old pair until a pair of the
      // new generation works, then switches (iceConnectionState may never leave 'connected'),
      // so watch the transport's ufrag and its selected pair instead.
      const deadline = Date.now() + 10_000;
      let ice = null;
      while (Date.now() < deadline) {
        ice = await page.evaluate(async () => {
          const stats = [...(await window.rt.pc.getStats()).values()];
          const t = stats.find((s) => s.type === 'transport');
          const pair = stats.find((s) => s.id === t?.selectedCandidatePairId);
          return { ufrag: t?.iceLocalUsernameFragment, iceState: t?.iceState, dtlsState: t?.dtlsState, pair: pair?.state, nominated: pair?.nominated, states: window.rt.iceStates, conn: window.rt.pc.connectionState };
        });
        if (ice.ufrag === r.newUfrag && ice.pair === 'succeeded') break;
        await sleep(50);
      }
      assert.equal(ice.ufrag, r.newUfrag, `transport on the new ICE generation: ${JSON.stringify(ice)}`);
      assert.equal(ice.pair, 'succeeded', `selected pair after restart: ${JSON.stringify(ice)}`);
      assert.equal(ice.conn, 'connected', 'DTLS association kept');
      const states = ice;
      const at = (await inboundAudio(page)).packetsReceived;
      await sleep(1000);
      const after = await inboundAudio(page);
      assert.ok(after.packetsReceived > at + 20, `audio after the restart: ${at} → ${after.packetsReceived}`);

      // The same call on the server, still one.
      const call = findCall(await adminCalls(server), callId);
      assert.ok(call && call.call_id === callId, `call ${callId} still listed`);
      assert.equal(call.state, 'connected');
      console.log(`ice restart: ufrag ${r.oldUfrag} → ${r.newUfrag}, transport ${JSON.stringify(states)}, audio ${before.packetsReceived} → ${after.packetsReceived} packets`);
    } finally {
      await rctx.context.close().catch(() => {});
    }
  });

  test('a transcription ek_ key: the browser\'s call is a transcription session, its turn transcribed, no responses', { timeout: 30_000 }, async () => {
    const key = await mintClientSecret(server, {
      type: 'transcription',
      audio: { input: { transcription: { model: 'gpt-4o-transcribe', language: 'en' } } },
    });
    assert.ok(key.minted, key.note);
    const tctx = await openPage(browser, `${pages.origin}/`);
    try {
      const { page } = tctx;
      const baseUrl = server.baseUrl.replace(/\/$/, '');
      const started = await page.evaluate((o) => window.startPlain(o), { baseUrl, key: key.key });
      assert.equal(started.calls.status, 201);
      const created = await waitForEvent(page, { type: 'session.created' }, { timeoutMs: 5_000 });
      assert.equal(created.event.session.type, 'transcription');
      assert.equal(created.event.session.audio.input.transcription.language, 'en', 'the key\'s transcription config');
      // fixtures/turn.wav: a second of silence, one sentence, then silence: the server VAD ends the turn.
      const done = await waitForEvent(page, { type: 'conversation.item.input_audio_transcription.completed' }, { timeoutMs: 15_000 });
      assert.match(done.event.transcript, /\S/, 'a transcript');
      const { events } = await pageEvents(page);
      assert.ok(!events.some((e) => e.type.startsWith('response.')), `no responses: ${events.map((e) => e.type).join(' ')}`);
      assertServerEventShapes(assert, events, 'transcription key (page)');
      console.log(`plain flow, transcription key: "${done.event.transcript}"`);
    } catch (err) {
      const { events } = await pageEvents(tctx.page).catch(() => ({ events: [] }));
      console.error(`transcription key failure; events:\n${eventDump(events)}\n${await serverDiagnostics(server, { adminPaths: ['/admin/calls'] })}`);
      throw err;
    } finally {
      await tctx.context.close().catch(() => {});
    }
  });
});
