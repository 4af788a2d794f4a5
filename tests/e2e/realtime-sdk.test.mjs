// The official OpenAI Agents SDK for voice (@openai/agents-realtime, pinned in package.json) runs inside
// Debian's headless chromium against voice-edge, changing nothing but the base URL:
//   new RealtimeSession(new RealtimeAgent(…), { transport: new OpenAIRealtimeWebRTC({ baseUrl }), model })
// The page (realtime-sdk.page.mjs, bundled with esbuild at test time) is served from another loopback
// origin than voice-edge, so the SDK's POST /v1/realtime/calls is a real cross-origin request.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/realtime-sdk.test.mjs
//
// Fake microphones (chromium loops the file): fixtures/turn.wav (1 s silence, one spoken sentence, 6.5 s
// silence) and fixtures/bargein.wav (a sentence, 1.2 s silence, a second sentence that lands while the
// echo of the first is playing). See fixtures/README.md.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT, launchBrowser, openPage, serverDiagnostics, startServer } from './harness.mjs';
import { assertServerEventShapes } from './openai-types.mjs';
import {
  TURN_CYCLE,
  adminCalls,
  bundleBrowserEntry,
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

const TURN_WAV = path.join(REPO_ROOT, 'fixtures', 'turn.wav');
const BARGEIN_WAV = path.join(REPO_ROOT, 'fixtures', 'bargein.wav');
const FILE_TIMEOUT_MS = 90_000;
const CONNECT_LIMIT_MS = 4_000; // the SDK's own fallback is 5 s ("Timed out waiting for session.updated ack")
const SDK_VERSION = '0.20.0';

const HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>agents-realtime e2e</title></head>
<body><p>@openai/agents-realtime against voice-edge</p><script type="module" src="/sdk.js"></script></body></html>`;

describe(`@openai/agents-realtime ${SDK_VERSION} (OpenAIRealtimeWebRTC) in headless chromium`, { timeout: FILE_TIMEOUT_MS }, () => {
  let server = null;
  let pages = null; // static server for the page + bundle (another origin)
  let key = null; // {key, minted, note}
  const browsers = new Map(); // fixture → browser
  const contexts = [];
  const results = {};

  before(async () => {
    const [srv, bundle] = await Promise.all([startServer({ readyMs: 30_000 }), bundleBrowserEntry('realtime-sdk.page.mjs')]);
    server = srv;
    pages = await startStaticServer({
      '/': { type: 'text/html; charset=utf-8', body: HTML },
      '/sdk.js': { type: 'text/javascript; charset=utf-8', body: bundle },
    });
    key = await mintClientSecret(server);
    console.log(`agents-realtime: page origin ${pages.origin}, voice-edge ${server.baseUrl}; key: ${key.note}`);
  });

  after(async () => {
    for (const c of contexts) await c.context.close().catch(() => {});
    for (const b of browsers.values()) await b.close().catch(() => {});
    if (pages) await pages.close().catch(() => {});
    if (server) await server.stop().catch(() => {});
    if (Object.keys(results).length) console.log(`agents-realtime results: ${JSON.stringify(results)}`);
  });

  async function browserFor(audioFile) {
    if (!browsers.has(audioFile)) browsers.set(audioFile, await launchBrowser({ audioFile }));
    return browsers.get(audioFile);
  }

  /** A fresh page on the static origin with the SDK bundle loaded, and a connected session. */
  async function connectedPage(audioFile, sessionOpts) {
    const ctx = await openPage(await browserFor(audioFile), `${pages.origin}/`);
    contexts.push(ctx);
    await ctx.page.waitForFunction(() => window.rtReady === true, null, { timeout: 10_000 });
    const baseUrl = new URL('/v1/realtime/calls', server.baseUrl).href;
    const conn = await Promise.race([
      ctx.page.evaluate((o) => window.startSession(o), { baseUrl, apiKey: key.key, ...sessionOpts }),
      sleep(15_000).then(() => {
        throw new Error('session.connect() did not settle within 15 s');
      }),
    ]).catch(async (e) => {
      await failureDump(ctx, e);
      throw e;
    });
    return { ctx, conn };
  }

  async function failureDump(ctx, err) {
    const parts = [];
    if (ctx?.page) {
      try {
        const rt = await ctx.page.evaluate(() => ({
          events: window.rt.events,
          sent: window.rt.sent,
          sdk: window.rt.sdk,
          warnings: window.rt.warnings,
          connectMs: window.rt.connectMs,
          connectError: window.rt.connectError,
          callId: window.rt.callId,
          dataChannel: window.rt.dataChannel,
          pc: window.rt.pc && { connectionState: window.rt.pc.connectionState, iceConnectionState: window.rt.pc.iceConnectionState },
        }));
        parts.push(`connect: ${rt.connectMs} ms, error ${rt.connectError}, callId ${rt.callId}, pc ${JSON.stringify(rt.pc)}, dc ${JSON.stringify(rt.dataChannel)}`);
        parts.push(`server events (${rt.events.length}):\n${eventDump(rt.events)}`);
        parts.push(`client events sent by the SDK (${rt.sent.length}):\n${eventDump(rt.sent)}`);
        parts.push(`RealtimeSession events:\n${rt.sdk.map((e) => JSON.stringify(e)).join('\n')}`);
        parts.push(`console warnings:\n${rt.warnings.map((w) => `${w.level}: ${w.text}`).join('\n')}`);
        parts.push(`inbound audio: ${JSON.stringify(await inboundAudio(ctx.page))}`);
      } catch (e) {
        parts.push(`(could not read page: ${e.message})`);
      }
      parts.push(`browser console (${ctx.consoleLines.length} lines):\n${ctx.consoleLines.join('\n')}`);
    }
    if (pages) parts.push(`page server requests: ${pages.requests.join(', ')}`);
    if (server) parts.push(await serverDiagnostics(server, { adminPaths: ['/admin/stats', '/admin/calls'] }));
    console.error(`\n===== agents-realtime failure diagnostics (${err?.message?.split('\n')[0]}) =====\n${parts.join('\n\n')}\n===== end diagnostics =====\n`);
  }

  test('connect() resolves on session.updated; a spoken turn and sendMessage() get spoken replies', { timeout: 40_000 }, async () => {
    let ctx = null;
    try {
      const { ctx: c, conn } = await connectedPage(TURN_WAV, { model: 'echo' });
      ctx = c;
      const { page } = ctx;
      results.connectMs = Math.round(conn.connectMs);
      console.log(`agents-realtime: connect() resolved in ${conn.connectMs.toFixed(0)} ms (call ${conn.callId})`);

      // connect(): resolved on the session.updated ack, well before the SDK's 5 s fallback.
      assert.equal(conn.status, 'connected');
      assert.ok(conn.connectMs < CONNECT_LIMIT_MS, `connect() took ${conn.connectMs.toFixed(0)} ms (limit ${CONNECT_LIMIT_MS})`);
      const warnings = await page.evaluate(() => window.rt.warnings);
      assert.ok(
        !warnings.some((w) => /Timed out waiting for session\.updated/.test(w.text)),
        `SDK warned: ${JSON.stringify(warnings)}`,
      );
      assert.ok(conn.pcIsRecorded, 'transport.connectionState.peerConnection is the RTCPeerConnection the SDK created');
      assert.match(String(conn.callId), /\S/, 'transport.callId from the exposed Location header');

      let { events, sent } = await pageEvents(page);
      assert.equal(events[0]?.type, 'session.created', `first server event: ${events[0]?.type}`);
      assert.ok(events.some((e) => e.type === 'session.updated'), 'session.updated received');
      const firstUpdate = sent.find((e) => e.type === 'session.update');
      assert.ok(firstUpdate, 'the SDK sent session.update');
      assert.equal(firstUpdate.session.model, 'echo');
      const audio0 = await inboundAudio(page);

      // A spoken turn (fixtures/turn.wav): the whole event cycle of docs/realtime-protocol.md §4, in order.
      const started = await waitForEvent(page, { type: 'input_audio_buffer.speech_started' }, { timeoutMs: 10_000 });
      const speechStopped = await waitForEvent(page, { type: 'input_audio_buffer.speech_stopped' }, { from: started.index, timeoutMs: 10_000 });
      const created = await waitForEvent(page, { type: 'response.created' }, { from: started.index, timeoutMs: 5_000 });
      const respId = created.event.response.id;
      await waitForEvent(page, { type: 'output_audio_buffer.stopped', response_id: respId }, { from: created.index, timeoutMs: 15_000 });
      await page.waitForFunction(() => window.rt.sdk.some((e) => e.type === 'agent_end'), null, { timeout: 3_000 }).catch(() => {});
      ({ events } = await pageEvents(page));

      const turn = events.slice(started.index);
      assert.deepEqual(cycleTypes(turn, TURN_CYCLE), TURN_CYCLE, 'event order of a spoken turn');
      const userItemId = started.event.item_id;
      assert.equal(typeof userItemId, 'string', 'speech_started.item_id');
      const committed = turn.find((e) => e.type === 'input_audio_buffer.committed');
      assert.equal(committed.item_id, userItemId, 'committed.item_id = speech_started.item_id');
      const userAdded = turn.find((e) => e.type === 'conversation.item.added');
      assert.equal(userAdded.item.id, userItemId, 'user item id');
      assert.equal(userAdded.item.role, 'user');
      assert.equal(userAdded.item.content?.[0]?.type, 'input_audio', JSON.stringify(userAdded.item));
      assert.ok('transcript' in userAdded.item.content[0] && userAdded.item.content[0].transcript === null, 'input_audio transcript: null');
      const reply = checkResponse(assert, events, respId);
      assert.match(reply.transcript, /^Echoing your \d+(\.\d+)? second turn\.?$/, 'echo transcript');

      const generic = events.filter((e) => e.generic);
      assert.deepEqual(generic.map((e) => `${e.type}: ${e.schemaIssues}`), [], 'server events the SDK schema rejects');
      let sdk = await page.evaluate(() => window.rt.sdk);
      const ends = sdk.filter((e) => e.type === 'agent_end');
      assert.equal(ends.length, 1, `agent_end events: ${JSON.stringify(sdk)}`);
      assert.equal(ends[0].text, reply.transcript, 'agent_end text');
      assert.ok(sdk.some((e) => e.type === 'agent_start'), 'agent_start');
      assert.ok(sdk.some((e) => e.type === 'audio_stopped'), 'audio_stopped');

      const audio1 = await inboundAudio(page);
      assert.ok(audio1, 'inbound-rtp audio stats');
      assert.ok(audio1.packetsReceived > (audio0?.packetsReceived ?? 0), `packetsReceived ${audio0?.packetsReceived} → ${audio1.packetsReceived}`);
      assert.ok(audio1.totalAudioEnergy > (audio0?.totalAudioEnergy ?? 0), `totalAudioEnergy ${audio0?.totalAudioEnergy} → ${audio1.totalAudioEnergy}`);
      const tStarted = events.find((e) => e.type === 'output_audio_buffer.started' && e.response_id === respId).t;
      results.clientTurnGapMs = Math.round(tStarted - speechStopped.event.t);
      console.log(
        `agents-realtime: spoken turn → "${reply.transcript}", ${audio1.packetsReceived - (audio0?.packetsReceived ?? 0)} packets, ` +
          `energy ${audio1.totalAudioEnergy.toFixed(4)}; speech_stopped → output_audio_buffer.started ${results.clientTurnGapMs} ms (client clock)`,
      );

      // sendMessage(): a text message answered with speech. The mic is muted first (SDK mute: the track
      // is disabled and sends silence) so the looping fixture cannot start a second turn meanwhile.
      await page.evaluate(() => window.rt.session.mute(true));
      const TEXT = 'Testing the text path.';
      const from = events.length;
      const sentFrom = sent.length;
      await page.evaluate((t) => window.rt.session.sendMessage(t), TEXT);
      const created2 = await waitForEvent(page, { type: 'response.created' }, { from, timeoutMs: 5_000 });
      const respId2 = created2.event.response.id;
      await waitForEvent(page, { type: 'output_audio_buffer.stopped', response_id: respId2 }, { from: created2.index, timeoutMs: 15_000 });
      await page.waitForFunction(() => window.rt.sdk.filter((e) => e.type === 'agent_end').length >= 2, null, { timeout: 3_000 }).catch(() => {});
      ({ events, sent } = await pageEvents(page));
      const mySent = sent.slice(sentFrom);
      const create = mySent.find((e) => e.type === 'conversation.item.create');
      assert.equal(create?.item?.content?.[0]?.text, TEXT, `conversation.item.create sent: ${JSON.stringify(mySent)}`);
      assert.ok(mySent.some((e) => e.type === 'response.create'), 'response.create sent');
      const userText = events.slice(from).find((e) => e.type === 'conversation.item.added' && e.item?.role === 'user');
      assert.equal(userText?.item?.content?.[0]?.text, TEXT, 'user text item added');
      const reply2 = checkResponse(assert, events, respId2);
      assert.match(reply2.transcript, /You said:?\s*Testing the text path/i, 'TTS reply transcript');
      sdk = await page.evaluate(() => window.rt.sdk);
      assert.deepEqual(sdk.filter((e) => e.type === 'agent_end').map((e) => e.text), [reply.transcript, reply2.transcript], 'agent_end texts');
      const audio2 = await inboundAudio(page);
      assert.ok(audio2.packetsReceived > audio1.packetsReceived, `packetsReceived ${audio1.packetsReceived} → ${audio2.packetsReceived}`);
      assert.ok(audio2.totalAudioEnergy > audio1.totalAudioEnergy, `totalAudioEnergy ${audio1.totalAudioEnergy} → ${audio2.totalAudioEnergy}`);
      assert.deepEqual(events.filter((e) => e.generic).map((e) => `${e.type}: ${e.schemaIssues}`), [], 'server events the SDK schema rejects');
      assert.deepEqual(sdk.filter((e) => e.type === 'error'), [], 'RealtimeSession error events');
      assertServerEventShapes(assert, events, 'agents-realtime turn + sendMessage');
      console.log(
        `agents-realtime: sendMessage → "${reply2.transcript}", +${audio2.packetsReceived - audio1.packetsReceived} packets, ` +
          `energy +${(audio2.totalAudioEnergy - audio1.totalAudioEnergy).toFixed(4)}`,
      );

      // Server-side measurements for this call.
      const call = findCall(await adminCalls(server), conn.callId);
      console.log(`agents-realtime: /admin/calls voice (spoken turn call): ${JSON.stringify(call?.voice ?? call)}`);
      assert.ok(call?.voice, `/admin/calls has no voice stats for ${conn.callId}: ${JSON.stringify(call)}`);
      results.turnMs = call.voice.turn_ms;
      assert.ok(call.voice.turns_answered >= 1, `turns_answered ${call.voice.turns_answered}`);
      assert.equal(typeof call.voice.turn_ms, 'number', 'turn_ms measured');
    } catch (err) {
      await failureDump(ctx, err);
      throw err;
    }
  });

  test('session.interrupt() cancels a long tts reply and the audio stops', { timeout: 25_000 }, async () => {
    let ctx = null;
    try {
      // A silent microphone (SDK mediaStream option), so only the interrupt ends the reply.
      const { ctx: c } = await connectedPage(TURN_WAV, { model: 'tts', silentMic: true });
      ctx = c;
      const { page } = ctx;
      const LONG =
        'This is a long answer that keeps talking for quite a while, so that the test can interrupt it ' +
        'half way through. It goes on about the weather, the sea, the mountains and the roads between them, ' +
        'and it would take many seconds to finish if nobody stopped it.';
      await page.evaluate((t) => window.rt.session.sendMessage(t), LONG);
      const created = await waitForEvent(page, { type: 'response.created' }, { timeoutMs: 5_000 });
      const respId = created.event.response.id;
      await waitForEvent(page, { type: 'output_audio_buffer.started', response_id: respId }, { from: created.index, timeoutMs: 10_000 });
      await sleep(1200);
      let { events } = await pageEvents(page);
      assert.ok(
        !events.some((e) => e.type === 'response.done' && e.response.id === respId),
        'the long reply finished before the interrupt; make the text longer',
      );
      const sentBefore = (await pageEvents(page)).sent.length;
      const { tInterrupt, samples } = await page.evaluate(() => window.interruptAndSample({ beforeMs: 300, afterMs: 1200 }));
      const done = await waitForEvent(page, { type: 'response.done', 'response.id': respId }, { timeoutMs: 3_000 });
      await waitForEvent(page, { type: 'output_audio_buffer.cleared' }, { timeoutMs: 3_000 });
      let sent;
      ({ events, sent } = await pageEvents(page));

      const mySent = sent.slice(sentBefore).map((e) => e.type);
      assert.deepEqual(mySent.slice(0, 2), ['response.cancel', 'output_audio_buffer.clear'], `client events sent by interrupt(): ${mySent}`);
      assert.equal(done.event.response.status, 'cancelled', `response.done: ${JSON.stringify(done.event.response.status_details)}`);
      assert.equal(done.event.response.status_details?.reason, 'client_cancelled', 'status_details.reason');
      const cleared = events.find((e) => e.type === 'output_audio_buffer.cleared');
      assert.equal(cleared.response_id, respId, 'output_audio_buffer.cleared.response_id');

      // Audio flowed before the interrupt and stops right after it.
      const pre = samples.filter((s) => s.t < tInterrupt);
      const post = samples.filter((s) => s.t >= tInterrupt);
      assert.ok(pre.length >= 2 && pre[pre.length - 1].packets > pre[0].packets, `audio was not flowing before interrupt(): ${JSON.stringify(pre)}`);
      let lastGrowth = tInterrupt;
      for (let i = 1; i < post.length; i++) if (post[i].packets > post[i - 1].packets) lastGrowth = post[i].t;
      if (post.length && pre.length && post[0].packets > pre[pre.length - 1].packets) lastGrowth = Math.max(lastGrowth, post[0].t);
      const stopMs = lastGrowth - tInterrupt;
      results.interruptStopMs = Math.round(stopMs);
      const lastPost = post[post.length - 1];
      console.log(
        `agents-realtime: interrupt() → response.done ${done.event.response.status}/${done.event.response.status_details?.reason}; ` +
          `inbound packets stopped growing ${stopMs.toFixed(0)} ms after interrupt() (${post[0]?.packets} → ${lastPost?.packets})`,
      );
      assert.ok(stopMs <= 250, `inbound packets kept growing ${stopMs.toFixed(0)} ms after interrupt(): ${JSON.stringify(post)}`);
      assert.deepEqual(events.filter((e) => e.generic).map((e) => `${e.type}: ${e.schemaIssues}`), [], 'server events the SDK schema rejects');
      const sdk = await page.evaluate(() => window.rt.sdk);
      assert.deepEqual(sdk.filter((e) => e.type === 'error'), [], 'RealtimeSession error events');
      assertServerEventShapes(assert, (await pageEvents(page)).events, 'agents-realtime interrupt');
    } catch (err) {
      await failureDump(ctx, err);
      throw err;
    }
  });

  test('barge-in by voice while the finished echo reply still plays: cleared and truncated to what was heard, not cancelled', { timeout: 25_000 }, async () => {
    let ctx = null;
    try {
      const { ctx: c, conn } = await connectedPage(BARGEIN_WAV, { model: 'echo' });
      ctx = c;
      const { page } = ctx;
      // As on the service, the reply is generated ahead of playback: it is complete while it still
      // plays, so talking over it truncates it rather than cancelling it.
      const cleared = await waitForEvent(page, { type: 'output_audio_buffer.cleared' }, { timeoutMs: 20_000, what: 'the barge-in clearing the buffer' });
      const respId = cleared.event.response_id;
      await waitForEvent(page, { type: 'conversation.item.truncated' }, { timeoutMs: 3_000 });
      const { events } = await pageEvents(page);

      const created = events.findIndex((e) => e.type === 'response.created' && e.response.id === respId);
      const audioStarted = events.findIndex((e) => e.type === 'output_audio_buffer.started' && e.response_id === respId);
      const done = events.findIndex((e) => e.type === 'response.done' && e.response.id === respId);
      assert.ok(created >= 0 && audioStarted > created, 'the reply had started playing');
      assert.ok(done > audioStarted, 'the reply has its response.done');
      assert.equal(events[done].response.status, 'completed', `the finished reply is not cancelled: ${JSON.stringify(events[done].response.status_details)}`);
      const bargeStart = events.findIndex((e, i) => i > audioStarted && e.type === 'input_audio_buffer.speech_started');
      assert.ok(done < bargeStart && bargeStart < cleared.index, 'response.done came before the barge-in, the clear after it');
      assert.ok(!events.some((e, i) => i > audioStarted && e.type === 'output_audio_buffer.stopped' && e.response_id === respId), 'a cleared playout never reports stopped');
      const itemId = events.find((e) => e.type === 'response.output_item.added' && e.response_id === respId)?.item?.id;
      const full = events.find((e) => e.type === 'response.output_audio_transcript.done' && e.response_id === respId)?.transcript;
      const truncated = events.find((e) => e.type === 'conversation.item.truncated');
      assert.equal(truncated.item_id, itemId, 'conversation.item.truncated names the assistant item');
      assert.equal(typeof truncated.audio_end_ms, 'number', 'truncated.audio_end_ms');
      // The SDK retrieves a truncated item: what stays is what was heard, a prefix of the reply.
      const retrieved = await waitForEvent(page, { type: 'conversation.item.retrieved', 'item.id': itemId }, { timeoutMs: 3_000, what: 'the truncated item retrieved' });
      const kept = retrieved.event.item.content[0].transcript;
      assert.ok(full.startsWith(kept) && kept.length < full.length, `kept "${kept}" of "${full}"`);
      assert.deepEqual(events.filter((e) => e.generic).map((e) => `${e.type}: ${e.schemaIssues}`), [], 'server events the SDK schema rejects');
      assertServerEventShapes(assert, events, 'agents-realtime barge-in');

      // The server's measurements: speech onset → last outgoing audio packet, and the turn latency.
      await sleep(300);
      const call = findCall(await adminCalls(server), conn.callId);
      console.log(`agents-realtime: /admin/calls voice (barge-in call): ${JSON.stringify(call?.voice ?? call)}`);
      assert.ok(call?.voice, `/admin/calls has no voice stats for ${conn.callId}`);
      assert.ok(call.voice.barge_ins >= 1, `barge_ins ${call.voice.barge_ins}`);
      assert.equal(typeof call.voice.barge_in_ms, 'number', 'barge_in_ms measured');
      results.bargeInMs = call.voice.barge_in_ms;
      results.bargeInCallTurnMs = call.voice.turn_ms;
      console.log(
        `agents-realtime: barge-in: response ${respId} completed ahead, then truncated at ${truncated.audio_end_ms} ms ("${kept}" of "${full}"); ` +
          `server barge_in_ms ${call.voice.barge_in_ms}, turn_ms ${call.voice.turn_ms}`,
      );
    } catch (err) {
      await failureDump(ctx, err);
      throw err;
    }
  });
});
