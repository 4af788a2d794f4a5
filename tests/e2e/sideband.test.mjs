// The sideband: an app server's WebSocket attached to a live WebRTC call, GET /v1/realtime?call_id=<id>.
// Headless chromium holds the call (the plain WebRTC flow page, plain-page.mjs; fake microphone
// fixtures/turn.wav); the call id is the last segment of the Location header of POST /v1/realtime/calls.
// Node (the `ws` package: Node 20 has no global WebSocket) attaches to it and drives a tool call:
// session.update with instructions, a get_weather tool and tool_choice 'required'; a user text message and
// response.create; function_call_output and response.create. Every server event of the call must reach both
// the data channel and the sideband (same event_id), client events are taken from either, the browser hears
// the spoken answer over RTP, and the sideband closes when the browser hangs up. A sideband to an unknown
// call is refused.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/sideband.test.mjs
import assert from 'node:assert/strict';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT, launchBrowser, openPage, serverDiagnostics, startServer } from './harness.mjs';
import { assertServerEventShapes } from './openai-types.mjs';
import { PLAIN_PAGE_HTML as HTML } from './plain-page.mjs';
import { adminCalls, eventDump, findCall, inboundAudio, pageEvents, sleep, startStaticServer, waitForEvent } from './realtime-util.mjs';
import { now, openEventSocket, realtimeUrl, wsEventDump } from './realtime-ws.mjs';

const TURN_WAV = path.join(REPO_ROOT, 'fixtures', 'turn.wav');
const FILE_TIMEOUT_MS = 90_000;
const HANGUP_LIMIT_MS = 5_000;

const GET_WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'Get the current weather for a location.',
  parameters: {
    type: 'object',
    // `examples`: the stub model makes arguments from the schema (without it, the smallest valid string, "").
    properties: { location: { type: 'string', description: 'The city.', examples: ['Paris'] } },
    required: ['location'],
  },
};
const WEATHER_OUTPUT = { temperature_c: 21, conditions: 'sunny' };
const userText = (text) => ({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });

describe('sideband WebSocket (GET /v1/realtime?call_id=…) on a WebRTC call held by headless chromium', { timeout: FILE_TIMEOUT_MS }, () => {
  let server = null;
  let pages = null;
  let browser = null;
  const contexts = [];
  const sockets = [];
  const results = {};

  before(async () => {
    server = await startServer({ readyMs: 30_000 });
    pages = await startStaticServer({ '/': { type: 'text/html; charset=utf-8', body: HTML } });
    browser = await launchBrowser({ audioFile: TURN_WAV });
  });

  after(async () => {
    for (const s of sockets) s.close();
    for (const c of contexts) await c.context.close().catch(() => {});
    if (browser) await browser.close().catch(() => {});
    if (pages) await pages.close().catch(() => {});
    if (server) await server.stop().catch(() => {});
    if (Object.keys(results).length) console.log(`sideband results: ${JSON.stringify(results)}`);
  });

  /** A page holding a call: {ctx, page, callId, location, created (the page's session.created)}. */
  async function startCall(query = '') {
    const ctx = await openPage(browser, `${pages.origin}/`);
    contexts.push(ctx);
    const { page } = ctx;
    const baseUrl = server.baseUrl.replace(/\/$/, '');
    const started = await Promise.race([
      page.evaluate((o) => window.startPlain(o), { baseUrl, key: 'ek_test', query }),
      sleep(15_000).then(() => {
        throw new Error('offer/answer + data channel open did not finish within 15 s');
      }),
    ]);
    assert.equal(started.calls.status, 201, 'POST /v1/realtime/calls status');
    const location = started.calls.location;
    assert.match(String(location), /^\/v1\/realtime\/calls\/rtc_[^/\s]+$/, 'Location header');
    const callId = location.split('/').pop();
    const created = await waitForEvent(page, { type: 'session.created' }, { timeoutMs: 5_000 });
    return { ctx, page, callId, location, created: created.event };
  }

  async function attach(callId, opts = {}) {
    const sb = await openEventSocket(realtimeUrl(server, { call_id: callId }), { headers: { Authorization: 'Bearer sk-test' }, ...opts });
    sockets.push(sb);
    return sb;
  }

  async function dump(label, { ctx, sb }, err) {
    const parts = [];
    if (sb) {
      parts.push(`sideband: protocol ${JSON.stringify(sb.protocol)}, closed ${JSON.stringify(sb.closed)}`);
      parts.push(`sideband server events (${sb.events.length}):\n${wsEventDump(sb.events, sb.t0)}`);
      parts.push(`sideband client events (${sb.sent.length}):\n${wsEventDump(sb.sent, sb.t0)}`);
    }
    if (ctx?.page) {
      try {
        const { events, sent } = await pageEvents(ctx.page);
        parts.push(`data channel server events (${events.length}):\n${eventDump(events)}`);
        parts.push(`data channel client events (${sent.length}):\n${eventDump(sent)}`);
        parts.push(`inbound audio: ${JSON.stringify(await inboundAudio(ctx.page))}`);
        parts.push(`pc: ${JSON.stringify(await ctx.page.evaluate(() => ({ conn: window.rt.pc?.connectionState, dc: window.rt.dc?.readyState, calls: window.rt.calls })))}`);
      } catch (e) {
        parts.push(`(could not read page: ${e.message})`);
      }
      parts.push(`browser console (${ctx.consoleLines.length} lines):\n${ctx.consoleLines.join('\n')}`);
    }
    if (server) parts.push(await serverDiagnostics(server, { adminPaths: ['/admin/calls'] }));
    console.error(`\n===== ${label} failure diagnostics (${err?.message?.split('\n')[0]}) =====\n${parts.join('\n\n')}\n===== end diagnostics =====\n`);
  }

  test('session.created with the call’s session; a tool call driven from the sideband, mirrored on the data channel; the browser hears the answer', { timeout: 45_000 }, async () => {
    let call = null;
    let sb = null;
    try {
      call = await startCall();
      const { page, callId } = call;
      // The browser configures the call first: its instructions, and no turn detection (the looping fake
      // microphone makes no turns, so only the sideband's messages start responses).
      const BROWSER_INSTRUCTIONS = 'Set by the browser before the sideband attached.';
      await page.evaluate(
        (instructions) => window.sendEvent({ type: 'session.update', session: { type: 'realtime', instructions, audio: { input: { turn_detection: null } } } }),
        BROWSER_INSTRUCTIONS,
      );
      await waitForEvent(page, { type: 'session.updated' }, { timeoutMs: 3_000 });

      // Attach. The first event is session.created with the call's current session.
      const t0 = now();
      sb = await attach(callId);
      results.sidebandOpenMs = Math.round(sb.openMs);
      const sbCreated = await sb.waitFor({ type: 'session.created' }, { timeoutMs: 3_000 });
      results.sidebandSessionCreatedMs = Math.round(sbCreated.event.t - t0);
      assert.equal(sbCreated.index, 0, 'session.created is the sideband’s first event');
      const s0 = sbCreated.event.session;
      assert.equal(s0.id, call.created.session.id, 'the sideband’s session is the call’s (session.id)');
      assert.equal(s0.instructions, BROWSER_INSTRUCTIONS, 'session.created carries the browser’s instructions');
      assert.equal(s0.audio?.input?.turn_detection, null, 'session.created carries turn_detection: null');
      console.log(`sideband: attached to ${callId} in ${sb.openMs.toFixed(0)} ms (upgrade), session.created after ${results.sidebandSessionCreatedMs} ms`);

      // 1. session.update from the sideband: instructions, tools, tool_choice 'required'.
      const SB_INSTRUCTIONS = 'You are a weather assistant; call get_weather.';
      sb.send({ type: 'session.update', session: { type: 'realtime', instructions: SB_INSTRUCTIONS, tools: [GET_WEATHER], tool_choice: 'required' } });
      const sbUpdated = await sb.waitFor({ type: 'session.updated' }, { timeoutMs: 3_000 });
      const su = sbUpdated.event.session;
      assert.equal(su.instructions, SB_INSTRUCTIONS, 'session.updated instructions');
      assert.deepEqual(su.tools?.map((t) => t.name), ['get_weather'], 'session.updated tools');
      assert.equal(su.tool_choice, 'required', 'session.updated tool_choice');
      assert.equal(su.audio?.input?.turn_detection, null, 'the browser’s turn_detection: null is kept');
      const dcUpdated = await waitForEvent(page, { type: 'session.updated', event_id: sbUpdated.event.event_id }, { timeoutMs: 3_000, what: 'the sideband’s session.updated on the data channel' });
      assert.deepEqual(dcUpdated.event.session.tools?.map((t) => t.name), ['get_weather'], 'the data channel sees the tools');
      assert.equal(dcUpdated.event.session.tool_choice, 'required');

      // 2. A user message + response.create from the sideband: the model calls get_weather.
      let from = sb.events.length;
      sb.send(userText("what's the weather in Paris"));
      sb.send({ type: 'response.create' });
      const argsDone = await sb.waitFor({ type: 'response.function_call_arguments.done' }, { from, timeoutMs: 5_000 });
      assert.equal(argsDone.event.name, 'get_weather', 'function name');
      const args = JSON.parse(argsDone.event.arguments);
      assert.equal(args.location, 'Paris', `arguments: ${argsDone.event.arguments}`);
      const callRespId = argsDone.event.response_id;
      const callDone = await sb.waitFor({ type: 'response.done', 'response.id': callRespId }, { from, timeoutMs: 5_000 });
      assert.equal(callDone.event.response.status, 'completed');
      assert.ok(callDone.event.response.output.some((o) => o.type === 'function_call' && o.call_id === argsDone.event.call_id), 'response.done lists the call');
      const userAdded = sb.events.slice(from).find((e) => e.type === 'conversation.item.added' && e.item?.role === 'user');
      assert.equal(userAdded?.item?.content?.[0]?.text, "what's the weather in Paris", 'the sideband’s user message');
      // The same events on the data channel.
      const dcArgs = await waitForEvent(page, { type: 'response.function_call_arguments.done', event_id: argsDone.event.event_id }, { timeoutMs: 3_000, what: 'the function call on the data channel' });
      assert.equal(dcArgs.event.call_id, argsDone.event.call_id);
      assert.equal(dcArgs.event.arguments, argsDone.event.arguments);
      await waitForEvent(page, { type: 'response.done', event_id: callDone.event.event_id }, { timeoutMs: 3_000 });
      console.log(`sideband: get_weather(${argsDone.event.arguments}) call ${argsDone.event.call_id}, seen by the sideband and the data channel`);

      // 3. function_call_output + response.create from the sideband: the answer is spoken to the browser.
      const audio0 = await inboundAudio(page);
      from = sb.events.length;
      const dcFrom = (await pageEvents(page)).events.length;
      const tOutput = now();
      sb.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: argsDone.event.call_id, output: JSON.stringify(WEATHER_OUTPUT) } });
      sb.send({ type: 'response.create' });
      const created = await sb.waitFor({ type: 'response.created' }, { from, timeoutMs: 5_000 });
      const respId = created.event.response.id;
      const sbStarted = await sb.waitFor({ type: 'output_audio_buffer.started', response_id: respId }, { from, timeoutMs: 5_000 }).catch(() => null);
      const sbDone = await sb.waitFor({ type: 'response.done', 'response.id': respId }, { from, timeoutMs: 15_000 });
      assert.equal(sbDone.event.response.status, 'completed', `response.done: ${JSON.stringify(sbDone.event.response.status_details)}`);
      const outItem = sb.events.slice(from).find((e) => e.type === 'conversation.item.added' && e.item?.type === 'function_call_output');
      assert.equal(outItem?.item?.call_id, argsDone.event.call_id, 'function_call_output item added');
      const tdone = sb.events.slice(from).find((e) => e.type === 'response.output_audio_transcript.done' && e.response_id === respId);
      assert.match(tdone?.transcript ?? '', /get_weather tool returned/i, 'the answer speaks the tool output');
      const dcDone = await waitForEvent(page, { type: 'response.done', 'response.id': respId }, { from: dcFrom, timeoutMs: 5_000 });
      await waitForEvent(page, { type: 'output_audio_buffer.stopped', response_id: respId }, { from: dcFrom, timeoutMs: 15_000 });
      assert.equal(dcDone.event.event_id, sbDone.event.event_id, 'the same response.done on both');
      const audio1 = await inboundAudio(page);
      assert.ok(audio1, 'inbound-rtp audio stats');
      assert.ok(audio1.packetsReceived > (audio0?.packetsReceived ?? 0), `packetsReceived ${audio0?.packetsReceived} → ${audio1.packetsReceived}`);
      assert.ok(audio1.totalAudioEnergy > (audio0?.totalAudioEnergy ?? 0), `totalAudioEnergy ${audio0?.totalAudioEnergy} → ${audio1.totalAudioEnergy}`);
      results.outputToResponseDoneMs = Math.round(sbDone.event.t - tOutput);
      if (sbStarted) results.outputToAudioStartedMs = Math.round(sbStarted.event.t - tOutput);
      console.log(
        `sideband: answer "${tdone.transcript}"; browser +${audio1.packetsReceived - (audio0?.packetsReceived ?? 0)} packets, ` +
          `energy +${(audio1.totalAudioEnergy - (audio0?.totalAudioEnergy ?? 0)).toFixed(4)}; function_call_output → output_audio_buffer.started ` +
          `${results.outputToAudioStartedMs ?? '(not sent to the sideband)'} ms, → response.done ${results.outputToResponseDoneMs} ms (sideband clock)`,
      );

      // 4. A client event from the data channel while the sideband is attached: the sideband sees its result.
      const PAGE_INSTRUCTIONS = 'Changed again by the browser.';
      from = sb.events.length;
      await page.evaluate((instructions) => window.sendEvent({ type: 'session.update', session: { type: 'realtime', instructions } }), PAGE_INSTRUCTIONS);
      const sbUpdated2 = await sb.waitFor({ type: 'session.updated' }, { from, timeoutMs: 3_000, what: 'the browser’s session.updated on the sideband' });
      assert.equal(sbUpdated2.event.session.instructions, PAGE_INSTRUCTIONS);
      assert.deepEqual(sbUpdated2.event.session.tools?.map((t) => t.name), ['get_weather'], 'tools kept');

      // 5. Mirroring: every server event after the sideband's own session.created reached both, in the same
      // order, with the same event_id.
      await sleep(300);
      const { events: dcEvents } = await pageEvents(page);
      const sbIds = sb.events.slice(1).map((e) => `${e.type} ${e.event_id}`);
      const firstDc = dcEvents.findIndex((e) => e.event_id === sb.events[1]?.event_id);
      assert.ok(firstDc >= 0, `the sideband's first mirrored event ${sbIds[0]} is not on the data channel`);
      const dcIds = dcEvents.slice(firstDc).map((e) => `${e.type} ${e.event_id}`);
      const missingOnDc = sbIds.filter((id) => !dcIds.includes(id));
      const missingOnSb = dcIds.filter((id) => !sbIds.includes(id));
      assert.deepEqual(missingOnDc, [], 'sideband events not on the data channel');
      assert.deepEqual(missingOnSb, [], 'data channel events not on the sideband');
      assert.deepEqual(sbIds, dcIds, 'same events in the same order');
      // Arrival skew, both clocks as epoch ms (one machine).
      const dcOrigin = await page.evaluate(() => performance.timeOrigin);
      const dcT = new Map(dcEvents.map((e) => [e.event_id, dcOrigin + e.t]));
      const skews = sb.events.slice(1).map((e) => performance.timeOrigin + e.t - dcT.get(e.event_id)).sort((a, b) => a - b);
      results.mirroredEvents = sbIds.length;
      results.sidebandMinusDataChannelMedianMs = Math.round(skews[Math.floor(skews.length / 2)] * 10) / 10;
      const worst = sb.events.slice(1).reduce((w, e) => (Math.abs(performance.timeOrigin + e.t - dcT.get(e.event_id)) > Math.abs(w.skew) ? { type: e.type, skew: performance.timeOrigin + e.t - dcT.get(e.event_id) } : w), { skew: 0 });
      console.log(
        `sideband: ${sbIds.length} events mirrored; arrival sideband − data channel (epoch clocks, polling-free on both sides): ` +
          `median ${results.sidebandMinusDataChannelMedianMs} ms, min ${skews[0].toFixed(1)}, max ${skews[skews.length - 1].toFixed(1)} (largest: ${worst.type} ${worst.skew.toFixed(1)} ms)`,
      );
      const dupCreated = dcEvents.filter((e) => e.type === 'session.created').length;
      console.log(`sideband: session.created events on the data channel: ${dupCreated}`);
      assert.deepEqual(sb.events.filter((e) => e.type === 'error'), [], 'error events on the sideband');
      assertServerEventShapes(assert, sb.events, 'sideband events');
      for (const e of sb.events) assert.ok(!e.binaryFrame, `${e.type} came as a binary frame`);
    } catch (err) {
      await dump('sideband tool call', { ctx: call?.ctx, sb }, err);
      throw err;
    }
  });

  test('the sideband closes when the browser hangs up; then the call id is refused', { timeout: 30_000 }, async () => {
    let call = null;
    let sb = null;
    try {
      call = await startCall('?model=loopback');
      sb = await attach(call.callId);
      await sb.waitFor({ type: 'session.created' }, { timeoutMs: 3_000 });
      await sleep(300);
      assert.equal(sb.closed, null, 'the sideband is open while the call is');
      const tHangup = now();
      await call.page.evaluate(() => {
        window.rt.dc.close();
        window.rt.pc.close();
      });
      const closed = await sb.waitClosed(10_000);
      assert.ok(closed, `the sideband was still open 10 s after the browser hung up (events: ${JSON.stringify(sb.events.map((e) => e.type))})`);
      results.hangupToSidebandCloseMs = Math.round(closed.t - tHangup);
      console.log(`sideband: browser hung up → sideband closed after ${results.hangupToSidebandCloseMs} ms (code ${closed.code}${closed.reason ? `, "${closed.reason}"` : ''}); events after attach: ${JSON.stringify(sb.events.map((e) => e.type))}`);
      assert.ok(results.hangupToSidebandCloseMs <= HANGUP_LIMIT_MS, `sideband closed ${results.hangupToSidebandCloseMs} ms after hang-up (limit ${HANGUP_LIMIT_MS})`);
      assert.notEqual(closed.code, 1006, 'a close frame, not a dropped TCP connection');

      // The ended call: no longer listed, and a new sideband to it is refused.
      await sleep(200);
      assert.equal(findCall(await adminCalls(server), call.callId)?.call_id === call.callId, false, 'the call is gone from /admin/calls');
      const again = await attach(call.callId).then(
        async (s) => ({ opened: true, closed: await s.waitClosed(3_000), events: s.events.map((e) => e.type) }),
        (e) => ({ opened: false, status: e.status, message: e.message }),
      );
      console.log(`sideband: to the ended call → ${JSON.stringify(again)}`);
      assert.ok(again.opened ? again.closed && !again.events.includes('session.created') : again.status === 404, `a sideband to the ended call: ${JSON.stringify(again)}`);
    } catch (err) {
      await dump('sideband hang-up', { ctx: call?.ctx, sb }, err);
      throw err;
    }
  });

  test('the sideband closes when the app hangs up the call (POST {Location}/hangup)', { timeout: 20_000 }, async () => {
    let call = null;
    let sb = null;
    try {
      call = await startCall('?model=loopback');
      sb = await attach(call.callId);
      await sb.waitFor({ type: 'session.created' }, { timeoutMs: 3_000 });
      const tHangup = now();
      const res = await fetch(new URL(`${call.location}/hangup`, server.baseUrl), { method: 'POST', headers: { Authorization: 'Bearer sk-test' } });
      const body = await res.text();
      assert.ok(res.ok, `POST ${call.location}/hangup → ${res.status}: ${body}`);
      const closed = await sb.waitClosed(10_000);
      assert.ok(closed, 'the sideband was still open 10 s after POST …/hangup');
      results.httpHangupToSidebandCloseMs = Math.round(closed.t - tHangup);
      console.log(`sideband: POST ${call.location}/hangup ${res.status} → sideband closed after ${results.httpHangupToSidebandCloseMs} ms (code ${closed.code}); events: ${JSON.stringify(sb.events.map((e) => e.type))}`);
      assert.ok(results.httpHangupToSidebandCloseMs <= HANGUP_LIMIT_MS, `closed ${results.httpHangupToSidebandCloseMs} ms after the hang-up (limit ${HANGUP_LIMIT_MS})`);
    } catch (err) {
      await dump('sideband http hang-up', { ctx: call?.ctx, sb }, err);
      throw err;
    }
  });

  test('a sideband to an unknown call id is refused', { timeout: 15_000 }, async () => {
    for (const callId of ['rtc_doesnotexist0000000000000000', 'not-a-call-id']) {
      const res = await attach(callId).then(
        async (s) => ({ opened: true, closed: await s.waitClosed(3_000), events: s.events.map((e) => ({ type: e.type, code: e.error?.code })) }),
        (e) => ({ opened: false, status: e.status, body: e.body, message: e.message }),
      );
      console.log(`sideband: call_id=${callId} → ${JSON.stringify(res)}`);
      if (res.opened) {
        assert.ok(res.closed, `a sideband to ${callId} stayed open`);
        assert.ok(!res.events.some((e) => e.type === 'session.created'), `a sideband to ${callId} got session.created`);
      } else {
        assert.equal(res.status, 404, `upgrade to ${callId} refused with ${res.status}: ${res.message}`);
        assert.equal(JSON.parse(res.body).error?.code, 'call_not_found', `404 body: ${res.body}`);
      }
    }
  });
});
