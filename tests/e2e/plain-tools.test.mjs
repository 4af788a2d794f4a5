// Tool calls in the plain browser flow (fetch + RTCPeerConnection + the 'oai-events' data channel, no SDK),
// raw GA events: session.update with tools and tool_choice 'required', a text message and response.create;
// the exact event sequence of the function call; the app's function_call_output and response.create; the
// spoken answer carrying the output, with audio over RTP. Then two tools named in one message: parallel
// calls, and one call only with parallel_tool_calls false. Every server event is checked against the
// openai package's realtime.d.ts (openai-types.mjs).
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/plain-tools.test.mjs
//
// Turn detection is turned off (turn_detection: null), so the looping fake microphone makes no turns and
// only the text messages start responses.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT, launchBrowser, openPage, serverDiagnostics, startServer } from './harness.mjs';
import { assertServerEventShapes } from './openai-types.mjs';
import { PLAIN_PAGE_HTML as HTML } from './plain-page.mjs';
import { checkResponse, eventDump, inboundAudio, mintClientSecret, pageEvents, sleep, startStaticServer, waitForEvent } from './realtime-util.mjs';

const TURN_WAV = path.join(REPO_ROOT, 'fixtures', 'turn.wav');
const FILE_TIMEOUT_MS = 90_000;
const UNITS = ['celsius', 'fahrenheit'];

const GET_WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'Get the current weather for a city.',
  parameters: {
    type: 'object',
    properties: {
      city: { type: 'string', examples: ['Paris'] },
      unit: { type: 'string', enum: UNITS },
    },
    required: ['city', 'unit'],
    additionalProperties: false,
  },
};
const GET_TIME = {
  type: 'function',
  name: 'get_time',
  description: 'The local time in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string', default: 'Lisbon' } }, required: ['city'] },
};

/** The GA events of one response that only calls tools, for `n` calls, argument deltas collapsed. */
function callResponseTypes(n) {
  const one = [
    'response.output_item.added',
    'conversation.item.added',
    'response.function_call_arguments.delta',
    'response.function_call_arguments.done',
    'response.output_item.done',
    'conversation.item.done',
  ];
  return ['response.created', 'rate_limits.updated', ...Array.from({ length: n }, () => one).flat(), 'response.done'];
}

/** Event types of `span` with consecutive argument deltas collapsed to one. */
function collapsed(span) {
  const out = [];
  for (const e of span) {
    if (e.type === 'response.function_call_arguments.delta' && out[out.length - 1] === e.type) continue;
    out.push(e.type);
  }
  return out;
}

/**
 * Check a tools-only response `respId` in `events`: the exact GA sequence, ids consistent, deltas adding
 * up to `.done`'s arguments, response.done listing each call. Returns the calls [{call_id, name, args, item_id}].
 */
function checkCallResponse(events, respId, names) {
  const first = events.findIndex((e) => e.type === 'response.created' && e.response.id === respId);
  const last = events.findIndex((e, i) => i > first && e.type === 'response.done' && e.response.id === respId);
  assert.ok(first >= 0 && last > first, `response ${respId}: created #${first}, done #${last}`);
  const span = events.slice(first, last + 1);
  assert.deepEqual(collapsed(span), callResponseTypes(names.length), `event sequence of the call response ${respId}`);
  const done = span[span.length - 1].response;
  assert.equal(done.status, 'completed', `response.done status: ${JSON.stringify(done.status_details)}`);
  assert.ok(!events.some((e) => e.type === 'output_audio_buffer.started' && e.response_id === respId), 'a call-only response plays no audio');
  const calls = [];
  names.forEach((name, i) => {
    const added = span.filter((e) => e.type === 'response.output_item.added')[i];
    const item = added.item;
    assert.equal(added.response_id, respId);
    assert.equal(added.output_index, i, 'output_index');
    assert.equal(item.type, 'function_call');
    assert.equal(item.status, 'in_progress', 'output_item.added status');
    assert.equal(item.arguments, '', 'output_item.added arguments are empty');
    assert.equal(item.name, name);
    assert.match(item.call_id, /\S/, 'call_id');
    const convAdded = span.filter((e) => e.type === 'conversation.item.added')[i];
    assert.equal(convAdded.item.id, item.id, 'conversation.item.added is the call item');
    const deltas = span.filter((e) => e.type === 'response.function_call_arguments.delta' && e.item_id === item.id);
    assert.ok(deltas.length >= 1, 'argument deltas');
    for (const d of deltas) {
      assert.equal(d.call_id, item.call_id, 'delta.call_id');
      assert.equal(d.response_id, respId, 'delta.response_id');
      assert.equal(d.output_index, i, 'delta.output_index');
    }
    const argsDone = span.find((e) => e.type === 'response.function_call_arguments.done' && e.item_id === item.id);
    assert.equal(argsDone.call_id, item.call_id, '.done call_id');
    assert.equal(argsDone.name, name, '.done name');
    assert.equal(deltas.map((d) => d.delta).join(''), argsDone.arguments, 'deltas concatenate to .done arguments');
    const itemDone = span.find((e) => e.type === 'response.output_item.done' && e.item.id === item.id);
    assert.equal(itemDone.item.status, 'completed', 'output_item.done status');
    assert.equal(itemDone.item.arguments, argsDone.arguments, 'output_item.done arguments');
    assert.equal(itemDone.item.call_id, item.call_id);
    const convDone = span.find((e) => e.type === 'conversation.item.done' && e.item.id === item.id);
    assert.equal(convDone?.item?.status, 'completed', 'conversation.item.done');
    const out = done.output.find((o) => o.id === item.id);
    assert.ok(out, `response.done.output lacks ${item.id}`);
    assert.deepEqual(
      { type: out.type, call_id: out.call_id, name: out.name, arguments: out.arguments, status: out.status },
      { type: 'function_call', call_id: item.call_id, name, arguments: argsDone.arguments, status: 'completed' },
      'response.done lists the call',
    );
    calls.push({ call_id: item.call_id, name, args: JSON.parse(argsDone.arguments), item_id: item.id });
  });
  assert.equal(done.output.length, names.length, 'response.done output: the calls only');
  return calls;
}

describe('tool calls in the plain WebRTC flow (raw GA events) in headless chromium', { timeout: FILE_TIMEOUT_MS }, () => {
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

  async function dump(err) {
    const parts = [];
    if (ctx?.page) {
      try {
        const { events, sent } = await pageEvents(ctx.page);
        parts.push(`server events (${events.length}):\n${eventDump(events)}`);
        parts.push(`client events sent (${sent.length}):\n${eventDump(sent)}`);
        parts.push(`inbound audio: ${JSON.stringify(await inboundAudio(ctx.page))}`);
      } catch (e) {
        parts.push(`(could not read page: ${e.message})`);
      }
      parts.push(`browser console (${ctx.consoleLines.length} lines):\n${ctx.consoleLines.join('\n')}`);
    }
    if (server) parts.push(await serverDiagnostics(server, { adminPaths: ['/admin/calls'] }));
    console.error(`\n===== plain-tools failure diagnostics (${err?.message?.split('\n')[0]}) =====\n${parts.join('\n\n')}\n===== end diagnostics =====\n`);
  }

  const send = (page, ev) => page.evaluate((e) => window.sendEvent(e), ev);
  const userText = (text) => ({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });

  test("tool_choice 'required': the call's exact GA events, function_call_output, a spoken answer; parallel calls", { timeout: 45_000 }, async () => {
    try {
      const key = await mintClientSecret(server);
      ctx = await openPage(browser, `${pages.origin}/`);
      const { page } = ctx;
      const baseUrl = server.baseUrl.replace(/\/$/, '');
      const started = await page.evaluate((o) => window.startPlain(o), { baseUrl, key: key.key });
      assert.equal(started.calls.status, 201);
      const callId = started.calls.location.split('/').pop();
      await waitForEvent(page, { type: 'session.created' }, { timeoutMs: 5_000 });

      await send(page, {
        type: 'session.update',
        session: { type: 'realtime', tools: [GET_WEATHER, GET_TIME], tool_choice: 'required', audio: { input: { turn_detection: null } } },
      });
      const updated = await waitForEvent(page, { type: 'session.updated' }, { timeoutMs: 3_000 });
      assert.equal(updated.event.session.tool_choice, 'required', 'session.updated tool_choice');
      assert.deepEqual(updated.event.session.tools.map((t) => t.name), ['get_weather', 'get_time'], 'session.updated tools');
      assert.equal(updated.event.session.audio?.input?.turn_detection, null, 'turn detection off');

      // 1. A text message naming get_weather + response.create: one call, the exact GA sequence.
      let { events } = await pageEvents(page);
      let from = events.length;
      await send(page, userText('What is get_weather for Paris?'));
      await send(page, { type: 'response.create' });
      const created = await waitForEvent(page, { type: 'response.created' }, { from, timeoutMs: 5_000 });
      const callRespId = created.event.response.id;
      await waitForEvent(page, { type: 'response.done', 'response.id': callRespId }, { from: created.index, timeoutMs: 5_000 });
      ({ events } = await pageEvents(page));
      assert.deepEqual(
        events.slice(from, created.index).map((e) => e.type),
        ['conversation.item.added', 'conversation.item.done'],
        'the user message item before response.created',
      );
      const [call] = checkCallResponse(events, callRespId, ['get_weather']);
      assert.equal(typeof call.args.city, 'string', `city: ${JSON.stringify(call.args)}`);
      assert.equal(call.args.city, 'Paris', 'city from the schema examples');
      assert.ok(UNITS.includes(call.args.unit), `unit in the enum: ${JSON.stringify(call.args)}`);
      assert.deepEqual(Object.keys(call.args).sort(), ['city', 'unit']);

      // 2. The app's function_call_output + response.create: added to the conversation, then spoken.
      const OUTPUT = JSON.stringify({ temperature_c: 21, conditions: 'sunny' });
      const audio0 = await inboundAudio(page);
      from = events.length;
      await send(page, { type: 'conversation.item.create', item: { type: 'function_call_output', call_id: call.call_id, output: OUTPUT } });
      await send(page, { type: 'response.create' });
      const outAdded = await waitForEvent(page, { type: 'conversation.item.added', 'item.type': 'function_call_output' }, { from, timeoutMs: 3_000 });
      assert.equal(outAdded.event.item.call_id, call.call_id, 'function_call_output item call_id');
      assert.equal(outAdded.event.item.output, OUTPUT);
      assert.equal(outAdded.event.previous_item_id, call.item_id, 'the output follows the call item');
      const answer = await waitForEvent(page, { type: 'response.created' }, { from, timeoutMs: 5_000 });
      const answerId = answer.event.response.id;
      await waitForEvent(page, { type: 'output_audio_buffer.stopped', response_id: answerId }, { from: answer.index, timeoutMs: 20_000 });
      ({ events } = await pageEvents(page));
      const reply = checkResponse(assert, events, answerId);
      assert.equal(reply.transcript, `The get_weather tool returned: ${OUTPUT}`, 'the answer speaks the output');
      assert.ok(!reply.events.some((e) => e.type.startsWith('response.function_call')), 'no second call after the output, even under required');
      const audio1 = await inboundAudio(page);
      assert.ok(audio1.packetsReceived > (audio0?.packetsReceived ?? 0) + 25, `packetsReceived ${audio0?.packetsReceived} → ${audio1.packetsReceived}`);
      assert.ok(audio1.totalAudioEnergy > (audio0?.totalAudioEnergy ?? 0), `totalAudioEnergy ${audio0?.totalAudioEnergy} → ${audio1.totalAudioEnergy}`);
      console.log(
        `plain tools: call ${call.name}(${JSON.stringify(call.args)}) → answer "${reply.transcript}", ` +
          `+${audio1.packetsReceived - (audio0?.packetsReceived ?? 0)} packets`,
      );

      // 3. Both tools named: two calls in one response (output_index 0 and 1), then one with
      //    parallel_tool_calls false (response.create may not carry it, so through session.update).
      from = events.length;
      await send(page, userText('Call get_weather and get_time for Lisbon.'));
      await send(page, { type: 'response.create' });
      const par = await waitForEvent(page, { type: 'response.created' }, { from, timeoutMs: 5_000 });
      await waitForEvent(page, { type: 'response.done', 'response.id': par.event.response.id }, { from: par.index, timeoutMs: 5_000 });
      ({ events } = await pageEvents(page));
      const pair = checkCallResponse(events, par.event.response.id, ['get_weather', 'get_time']);
      assert.notEqual(pair[0].call_id, pair[1].call_id, 'distinct call ids');
      assert.equal(pair[1].args.city, 'Lisbon', 'get_time city from the schema default');

      from = events.length;
      await send(page, { type: 'session.update', session: { type: 'realtime', parallel_tool_calls: false } });
      await waitForEvent(page, { type: 'session.updated' }, { from, timeoutMs: 3_000 });
      await send(page, userText('Call get_weather and get_time for Lisbon.'));
      await send(page, { type: 'response.create' });
      const single = await waitForEvent(page, { type: 'response.created' }, { from, timeoutMs: 5_000 });
      await waitForEvent(page, { type: 'response.done', 'response.id': single.event.response.id }, { from: single.index, timeoutMs: 5_000 });
      ({ events } = await pageEvents(page));
      checkCallResponse(events, single.event.response.id, ['get_weather']);

      // Every event a well-formed RealtimeServerEvent, as the page got it and as the server logged it.
      for (const e of events) assert.equal(typeof e.event_id, 'string', `${e.type} event_id`);
      assertServerEventShapes(assert, events, 'plain tools (page)');
      const res = await fetch(new URL(`/v1/realtime/calls/${callId}/events`, server.baseUrl));
      const log = (await res.text()).trim().split('\n').map((l) => JSON.parse(l));
      assert.deepEqual(
        log.filter((l) => l.dir === 'server').map((l) => l.event.event_id),
        events.map((e) => e.event_id),
        'the event log holds the same server events in the same order',
      );
    } catch (err) {
      await dump(err);
      throw err;
    }
  });

  test('an ek_ minted with tools and instructions: session.created carries them and the tool fires with no session.update', { timeout: 30_000 }, async () => {
    try {
      if (ctx) await ctx.context.close().catch(() => {});
      const key = await mintClientSecret(server, {
        type: 'realtime',
        instructions: 'You are a weather assistant.',
        tools: [GET_WEATHER],
        tool_choice: 'required',
        audio: { input: { turn_detection: null } },
      });
      assert.ok(key.minted, key.note);
      ctx = await openPage(browser, `${pages.origin}/`);
      const { page } = ctx;
      const baseUrl = server.baseUrl.replace(/\/$/, '');
      const started = await page.evaluate((o) => window.startPlain(o), { baseUrl, key: key.key });
      assert.equal(started.calls.status, 201);
      const created = await waitForEvent(page, { type: 'session.created' }, { timeoutMs: 5_000 });
      const session = created.event.session;
      assert.equal(session.instructions, 'You are a weather assistant.', 'the key\'s instructions');
      assert.deepEqual(session.tools.map((t) => t.name), ['get_weather'], 'the key\'s tools');
      assert.equal(session.tool_choice, 'required');
      assert.equal(session.audio.input.turn_detection, null, 'the key\'s turn detection (off)');

      await send(page, userText('What is the weather in Paris?'));
      await send(page, { type: 'response.create' });
      const resp = await waitForEvent(page, { type: 'response.created' }, { from: created.index, timeoutMs: 5_000 });
      await waitForEvent(page, { type: 'response.done', 'response.id': resp.event.response.id }, { from: resp.index, timeoutMs: 5_000 });
      const { events, sent } = await pageEvents(page);
      const [call] = checkCallResponse(events, resp.event.response.id, ['get_weather']);
      assert.equal(call.args.city, 'Paris');
      assert.ok(!sent.some((e) => e.type === 'session.update'), 'the page sent no session.update');
      assertServerEventShapes(assert, events, 'connect-time session (page)');
    } catch (err) {
      await dump(err);
      throw err;
    }
  });
});
