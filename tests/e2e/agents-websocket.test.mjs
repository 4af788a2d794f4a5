// The official OpenAI Agents SDK for voice (@openai/agents-realtime, pinned in package.json) over the
// Realtime WebSocket transport, in Node (no browser), against voice-edge's GET /v1/realtime?model=…:
//   new OpenAIRealtimeWebSocket({ url: 'ws://127.0.0.1:PORT/v1/realtime?model=echo' })
// In Node the SDK opens the socket with the `ws` package (its `_shims` export for node) and authenticates
// with `Authorization: Bearer <apiKey>` headers. Audio goes up as base64 PCM16 24 kHz in
// `input_audio_buffer.append` (transport.sendAudio) and comes back as `response.output_audio.delta`, which
// the SDK emits as `audio` events. A raw `ws` client checks the browser-style sub-protocol auth and G.711.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/agents-websocket.test.mjs
//
// The microphone is fixtures/speech.wav (48 kHz mono PCM16: 3.06 s of speech, 1 s of silence), resampled
// to 24 kHz and sent in real-time-paced 20 ms chunks, followed by silence as a live microphone would.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { OpenAIRealtimeWebSocket, RealtimeAgent, RealtimeSession, tool } from '@openai/agents-realtime';
// The SDK's own server-event schema (same module instance the SDK uses; the package exports map hides it).
import { realtimeServerEventSchema } from './node_modules/@openai/agents-realtime/dist/openaiRealtimeEvents.mjs';
import { SPEECH_WAV, serverDiagnostics, startServer } from './harness.mjs';
import { assertServerEventShapes } from './openai-types.mjs';
import {
  audioDeltaBytes,
  halveRate,
  now,
  openEventSocket,
  readWav,
  realtimeUrl,
  rms,
  speechSpan,
  streamRealtime,
  wsEventDump,
} from './realtime-ws.mjs';

const FILE_TIMEOUT_MS = 120_000;
const SDK_VERSION = '0.20.0';
const PCM24_BYTES_PER_S = 24000 * 2;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** fixtures/speech.wav as 24 kHz PCM16, and where its speech is. */
function speechFixture() {
  const wav = readWav(SPEECH_WAV);
  assert.equal(wav.rate, 48000, 'speech.wav rate');
  assert.equal(wav.channels, 1, 'speech.wav channels');
  const samples = halveRate(wav.samples);
  return { samples, span: speechSpan(samples, 24000), durationMs: (samples.length * 1000) / 24000 };
}

/**
 * Record everything a transport (or session.transport) surfaces: server events ('*', with arrival time and
 * whether the SDK's schema rejects them), `audio` events (bytes, time, response id), connection changes.
 */
function record(transport) {
  const rec = { events: [], audio: [], statuses: [], errors: [], sent: [] };
  transport.on('*', (ev) => {
    const check = realtimeServerEventSchema.safeParse(ev);
    const r = { t: now(), ...ev };
    if (!check.success) {
      r.generic = true;
      r.schemaIssues = check.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`);
    }
    rec.events.push(r);
  });
  transport.on('audio', (a) => rec.audio.push({ t: now(), bytes: a.data.byteLength, responseId: a.responseId, rms: rms(new Uint8Array(a.data)) }));
  transport.on('connection_change', (s) => rec.statuses.push(s));
  transport.on('error', (e) => rec.errors.push(describe_(e)));
  // The client events the SDK writes to the socket.
  const origSendEvent = transport.sendEvent.bind(transport);
  transport.sendEvent = (ev) => {
    rec.sent.push({ t: now(), ...(ev.type === 'input_audio_buffer.append' ? { type: ev.type, bytes: Math.floor((ev.audio.length * 3) / 4) } : ev) });
    return origSendEvent(ev);
  };
  return rec;
}

function describe_(e) {
  const inner = e?.error ?? e;
  if (inner instanceof Error) return `${inner.name}: ${inner.message}`;
  if (typeof inner?.message === 'string') return inner.message; // ws ErrorEvent
  try {
    return JSON.stringify(inner);
  } catch {
    return String(inner);
  }
}

async function waitFor(rec, match, { from = 0, timeoutMs = 10_000, what } = {}) {
  const get = (o, p) => p.split('.').reduce((v, k) => (v == null ? v : v[k]), o);
  const deadline = now() + timeoutMs;
  for (;;) {
    for (let i = from; i < rec.events.length; i++) {
      if (Object.entries(match).every(([k, v]) => get(rec.events[i], k) === v)) return { index: i, event: rec.events[i] };
    }
    if (now() >= deadline) break;
    await sleep(5);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what || JSON.stringify(match)}; events: ${JSON.stringify(rec.events.slice(from).map((e) => e.type))}`);
}

/** Wait for the `count`-th server event satisfying `pred`. Returns {index, event}. */
async function waitUntil(rec, pred, { from = 0, count = 1, timeoutMs = 10_000, what = 'a matching event' } = {}) {
  const deadline = now() + timeoutMs;
  for (;;) {
    let seen = 0;
    for (let i = from; i < rec.events.length; i++) {
      if (pred(rec.events[i]) && ++seen === count) return { index: i, event: rec.events[i] };
    }
    if (now() >= deadline) break;
    await sleep(5);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; events: ${JSON.stringify(rec.events.slice(from).map((e) => e.type))}`);
}

/** The GA events of one spoken-audio response over the WebSocket transport (no output_audio_buffer.*). */
const WS_RESPONSE_CYCLE = [
  'response.created',
  'response.output_item.added',
  'conversation.item.added',
  'response.content_part.added',
  'response.output_audio.delta',
  'response.output_audio.done',
  'response.output_audio_transcript.done',
  'response.content_part.done',
  'response.output_item.done',
  'conversation.item.done',
  'response.done',
];

/** Types of `events` restricted to `cycle`, runs of one type collapsed, from cycle[0] through the last type. */
function cycleOf(events, cycle) {
  const set = new Set(cycle);
  const start = events.findIndex((e) => e.type === cycle[0]);
  if (start < 0) return [];
  const out = [];
  for (let i = start; i < events.length; i++) {
    const t = events[i].type;
    if (!set.has(t) || out[out.length - 1] === t) continue;
    out.push(t);
    if (t === cycle[cycle.length - 1]) break;
  }
  return out;
}

/** Check response `respId` in `events`; returns {transcript, audioBytes, firstDelta, done}. */
function checkWsResponse(events, respId) {
  const first = events.findIndex((e) => e.type === 'response.created' && e.response?.id === respId);
  const last = events.findIndex((e, i) => i > first && e.type === 'response.done' && e.response?.id === respId);
  assert.ok(first >= 0 && last > first, `response ${respId}: created #${first}, done #${last}`);
  const span = events.slice(first, last + 1);
  // The transcript deltas interleave with the audio deltas, so check them apart from the order.
  assert.deepEqual(
    cycleOf(span.filter((e) => e.type !== 'response.output_audio_transcript.delta' && e.type !== 'rate_limits.updated'), WS_RESPONSE_CYCLE),
    WS_RESPONSE_CYCLE,
    `event order of response ${respId}`,
  );
  const deltas = span.filter((e) => e.type === 'response.output_audio.delta');
  for (const d of deltas) {
    assert.equal(d.response_id, respId, 'output_audio.delta response_id');
    assert.equal(typeof d.item_id, 'string', 'output_audio.delta item_id');
    assert.match(d.delta, /^[A-Za-z0-9+/]*={0,2}$/, 'output_audio.delta is base64');
  }
  const tdeltas = span.filter((e) => e.type === 'response.output_audio_transcript.delta');
  assert.ok(tdeltas.length >= 1, 'response.output_audio_transcript.delta');
  const tdone = span.find((e) => e.type === 'response.output_audio_transcript.done');
  assert.equal(tdeltas.map((e) => e.delta).join(''), tdone.transcript, 'transcript deltas add up to .done');
  const done = span[span.length - 1];
  assert.equal(done.response.status, 'completed', `response.done: ${JSON.stringify(done.response.status_details)}`);
  assert.ok(!events.some((e) => e.type.startsWith('output_audio_buffer.')), 'no output_audio_buffer.* events over a WebSocket');
  return { transcript: tdone.transcript, audioBytes: audioDeltaBytes(span, respId), firstDelta: deltas[0], done, span };
}

describe(`@openai/agents-realtime ${SDK_VERSION} (OpenAIRealtimeWebSocket) in Node against GET /v1/realtime`, { timeout: FILE_TIMEOUT_MS }, () => {
  let server = null;
  const closers = [];
  const results = {};

  before(async () => {
    server = await startServer({ readyMs: 30_000 });
  });

  after(async () => {
    for (const c of closers) {
      try {
        c();
      } catch {
        /* closed */
      }
    }
    if (server) await server.stop().catch(() => {});
    if (Object.keys(results).length) console.log(`agents-websocket results: ${JSON.stringify(results)}`);
  });

  async function dump(label, rec, err) {
    const parts = [];
    if (rec) {
      const t0 = rec.events[0]?.t ?? 0;
      parts.push(`connection: ${JSON.stringify(rec.statuses)}; SDK errors: ${JSON.stringify(rec.errors)}`);
      parts.push(`server events (${rec.events.length}):\n${wsEventDump(rec.events, t0)}`);
      parts.push(`client events sent (${rec.sent.length}, appends collapsed):\n${wsEventDump(collapseAppends(rec.sent), t0)}`);
      parts.push(`audio events: ${rec.audio.length}, ${rec.audio.reduce((n, a) => n + a.bytes, 0)} bytes`);
    }
    if (server) parts.push(await serverDiagnostics(server, { adminPaths: ['/admin/stats', '/admin/calls'] }));
    console.error(`\n===== ${label} failure diagnostics (${err?.message?.split('\n')[0]}) =====\n${parts.join('\n\n')}\n===== end diagnostics =====\n`);
  }

  test('connect() with an apiKey, a spoken turn streamed with sendAudio() comes back as audio events, then sendMessage()', { timeout: 45_000 }, async () => {
    const url = realtimeUrl(server, { model: 'echo' });
    const transport = new OpenAIRealtimeWebSocket({ url });
    closers.push(() => transport.close());
    const rec = record(transport);
    try {
      const t0 = now();
      await Promise.race([
        transport.connect({ apiKey: 'sk-test', model: 'echo' }),
        sleep(10_000).then(() => {
          throw new Error('transport.connect() did not settle within 10 s');
        }),
      ]);
      const connectMs = now() - t0;
      results.connectMs = Math.round(connectMs);
      assert.equal(transport.status, 'connected', 'transport.status');
      assert.deepEqual(rec.statuses, ['connecting', 'connected'], 'connection_change events');
      const created = await waitFor(rec, { type: 'session.created' }, { timeoutMs: 3_000 });
      assert.equal(created.index, 0, 'session.created is the first server event');
      assert.match(created.event.session?.id ?? '', /^sess_/, 'session.id');
      // The SDK sends two updates: {tracing: 'auto'} on session.created, then its full config (connect()
      // does not wait for their acks over a WebSocket). Each gets a session.updated.
      const updates = rec.sent.filter((e) => e.type === 'session.update');
      const fullUpdate = updates.find((e) => e.session?.model);
      assert.equal(fullUpdate?.session?.model, 'echo', `the SDK sent session.update with the model: ${JSON.stringify(updates)}`);
      const updated = await waitUntil(rec, (e) => e.type === 'session.updated', { count: updates.length, timeoutMs: 3_000, what: `${updates.length} session.updated` });
      const session = updated.event.session;
      assert.deepEqual(session.audio?.input?.format, { type: 'audio/pcm', rate: 24000 }, 'input format');
      assert.deepEqual(session.audio?.output?.format, { type: 'audio/pcm', rate: 24000 }, 'output format');
      // The SDK's default turn detection is semantic_vad (served by the same VAD, eagerness auto: 500 ms).
      assert.equal(session.audio?.input?.turn_detection?.type, fullUpdate.session.audio.input.turn_detection.type, `turn detection: ${JSON.stringify(session.audio?.input?.turn_detection)}`);
      console.log(`agents-websocket: connect() → connected in ${connectMs.toFixed(0)} ms (session ${created.event.session.id})`);

      // A spoken turn: the fixture at 24 kHz, real-time paced, then silence until the reply is done.
      const { samples, span } = speechFixture();
      const from = rec.events.length;
      let replyDone = false;
      const streaming = streamRealtime((buf) => transport.sendAudio(buf), samples, { until: () => replyDone, maxSilenceMs: 8_000 });
      let speech;
      try {
        speech = await waitFor(rec, { type: 'input_audio_buffer.speech_started' }, { from, timeoutMs: 8_000 });
        const respCreated = await waitFor(rec, { type: 'response.created' }, { from: speech.index, timeoutMs: 8_000 });
        await waitFor(rec, { type: 'response.done', 'response.id': respCreated.event.response.id }, { from: respCreated.index, timeoutMs: 15_000 });
      } finally {
        replyDone = true;
      }
      const streamed = await streaming;
      const events = rec.events;
      const turn = events.slice(speech.index);
      const stopped = turn.find((e) => e.type === 'input_audio_buffer.speech_stopped');
      const committed = turn.find((e) => e.type === 'input_audio_buffer.committed');
      const userAdded = turn.find((e) => e.type === 'conversation.item.added' && e.item?.role === 'user');
      assert.ok(stopped && committed && userAdded, `speech_stopped, committed, user item: ${JSON.stringify(turn.map((e) => e.type))}`);
      assert.equal(committed.item_id, speech.event.item_id, 'committed.item_id = speech_started.item_id');
      assert.equal(userAdded.item.id, speech.event.item_id, 'user item id');
      assert.equal(userAdded.item.content?.[0]?.type, 'input_audio', JSON.stringify(userAdded.item));
      const respId = turn.find((e) => e.type === 'response.created').response.id;
      const reply = checkWsResponse(events, respId);
      assert.match(reply.transcript, /^Echoing your \d+(\.\d+)? second turn\.?$/, 'echo transcript');

      // The audio events the SDK emitted: the reply's deltas, as long as the turn that was spoken.
      const audio = rec.audio.filter((a) => a.responseId === respId);
      const audioBytes = audio.reduce((n, a) => n + a.bytes, 0);
      assert.equal(audioBytes, reply.audioBytes, 'the SDK emitted every delta as an audio event');
      assert.equal(audioBytes % 2, 0, 'PCM16: an even number of bytes');
      const audioMs = (audioBytes / PCM24_BYTES_PER_S) * 1000;
      const spokenMs = span.endMs - span.startMs;
      const turnMs = stopped.audio_end_ms - speech.event.audio_start_ms;
      const saidSeconds = Number(reply.transcript.match(/(\d+(?:\.\d+)?) second/)[1]);
      console.log(
        `agents-websocket: echo reply ${audio.length} audio events, ${audioBytes} bytes = ${audioMs.toFixed(0)} ms of 24 kHz PCM16; ` +
          `spoken ${spokenMs.toFixed(0)} ms, turn (speech_started.audio_start_ms → speech_stopped.audio_end_ms) ${turnMs} ms, transcript "${reply.transcript}"`,
      );
      assert.ok(Math.abs(audioMs - spokenMs) <= 1000, `echo audio ${audioMs.toFixed(0)} ms vs spoken ${spokenMs.toFixed(0)} ms`);
      assert.ok(Math.abs(audioMs / 1000 - saidSeconds) <= 0.15, `echo audio ${audioMs.toFixed(0)} ms vs transcript ${saidSeconds} s`);
      assert.ok(Math.max(...audio.map((a) => a.rms)) > 500, 'the echoed audio is not silence');

      // Latency: the last loud sample sent → the first audio delta (and → the first audio event).
      const tSpeechEnd = streamed.sentAt(span.endMs);
      const tFirstAudio = audio[0].t;
      results.speechEndToFirstAudioMs = Math.round(tFirstAudio - tSpeechEnd);
      results.speechStoppedToFirstAudioMs = Math.round(tFirstAudio - stopped.t);
      results.speechStoppedAudioEndMs = stopped.audio_end_ms;
      console.log(
        `agents-websocket: speech end → first audio delta ${results.speechEndToFirstAudioMs} ms ` +
          `(speech_stopped event → first delta ${results.speechStoppedToFirstAudioMs} ms; turn_detection ${JSON.stringify(session.audio.input.turn_detection)})`,
      );
      assert.ok(results.speechEndToFirstAudioMs > 0 && results.speechEndToFirstAudioMs < 3000, `speech end → first audio ${results.speechEndToFirstAudioMs} ms`);
      const appends = rec.sent.filter((e) => e.type === 'input_audio_buffer.append');
      assert.equal(appends.length, streamed.chunks, 'one input_audio_buffer.append per chunk');

      // sendMessage(): a text turn answered with speech of the text.
      const TEXT = 'Testing the text path.';
      const from2 = rec.events.length;
      const tSend = now();
      transport.sendMessage(TEXT);
      const created2 = await waitFor(rec, { type: 'response.created' }, { from: from2, timeoutMs: 5_000 });
      const respId2 = created2.event.response.id;
      await waitFor(rec, { type: 'response.done', 'response.id': respId2 }, { from: created2.index, timeoutMs: 15_000 });
      const userText = rec.events.slice(from2).find((e) => e.type === 'conversation.item.added' && e.item?.role === 'user');
      assert.equal(userText?.item?.content?.[0]?.text, TEXT, 'user text item added');
      const reply2 = checkWsResponse(rec.events, respId2);
      assert.match(reply2.transcript, /You said:?\s*Testing the text path/i, 'text reply transcript');
      const audio2 = rec.audio.filter((a) => a.responseId === respId2);
      const audio2Ms = (audio2.reduce((n, a) => n + a.bytes, 0) / PCM24_BYTES_PER_S) * 1000;
      assert.ok(audio2Ms > 500, `text reply audio ${audio2Ms.toFixed(0)} ms`);
      assert.ok(Math.max(...audio2.map((a) => a.rms)) > 300, 'the spoken text is not silence');
      results.sendMessageToFirstAudioMs = Math.round(audio2[0].t - tSend);
      console.log(`agents-websocket: sendMessage → "${reply2.transcript}", ${audio2Ms.toFixed(0)} ms of audio, first delta after ${results.sendMessageToFirstAudioMs} ms`);

      assert.deepEqual(rec.events.filter((e) => e.generic).map((e) => `${e.type}: ${e.schemaIssues}`), [], 'server events the SDK schema rejects');
      assert.deepEqual(rec.events.filter((e) => e.type === 'error'), [], 'error events');
      assert.deepEqual(rec.errors, [], 'transport error events');
      assertServerEventShapes(assert, rec.events, 'agents-websocket turn + sendMessage');

      transport.close();
      assert.equal(transport.status, 'disconnected');
    } catch (err) {
      await dump('agents-websocket', rec, err);
      throw err;
    }
  });

  test('RealtimeSession + RealtimeAgent with a tool() over the WebSocket transport (script:weather)', { timeout: 30_000 }, async () => {
    const toolCalls = [];
    const getWeather = tool({
      name: 'get_weather',
      description: 'Get the current weather for a city.',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
      strict: true,
      execute: async (args) => {
        toolCalls.push({ t: now(), args });
        return { temperature_c: 21, conditions: 'sunny' };
      },
    });
    const agent = new RealtimeAgent({ name: 'voice-edge-ws-e2e', instructions: 'You are a weather assistant.', tools: [getWeather] });
    const transport = new OpenAIRealtimeWebSocket({ url: realtimeUrl(server, { model: 'script:weather' }) });
    const session = new RealtimeSession(agent, { transport, model: 'script:weather' });
    closers.push(() => session.close());
    const rec = record(transport);
    const sdk = [];
    session.on('agent_tool_start', (_c, _a, t, d) => sdk.push({ t: now(), type: 'agent_tool_start', tool: t.name, arguments: d?.toolCall?.arguments }));
    session.on('agent_tool_end', (_c, _a, t, result) => sdk.push({ t: now(), type: 'agent_tool_end', tool: t.name, result }));
    session.on('agent_end', (_c, _a, text) => sdk.push({ t: now(), type: 'agent_end', text }));
    session.on('audio', (a) => sdk.push({ t: now(), type: 'audio', bytes: a.data.byteLength }));
    session.on('error', (e) => sdk.push({ t: now(), type: 'error', error: describe_(e) }));
    try {
      await session.connect({ apiKey: 'sk-test' });
      assert.equal(transport.status, 'connected');
      const upd = await waitUntil(rec, (e) => e.type === 'session.updated' && e.session?.tools?.length > 0, { timeoutMs: 3_000, what: 'session.updated with tools' });
      assert.deepEqual(upd.event.session.tools.map((t) => t.name), ['get_weather'], 'session.updated lists the agent tool');

      const tSend = now();
      session.sendMessage("What's the weather in Paris?");
      const argsDone = await waitFor(rec, { type: 'response.function_call_arguments.done' }, { timeoutMs: 8_000 });
      assert.equal(argsDone.event.name, 'get_weather');
      assert.deepEqual(JSON.parse(argsDone.event.arguments), { city: 'Paris', unit: 'celsius' }, 'the script’s arguments');
      // The SDK runs execute(), sends function_call_output + response.create; the script speaks the output.
      const outSent = await (async () => {
        const deadline = now() + 5_000;
        while (now() < deadline) {
          const s = rec.sent.find((e) => e.type === 'conversation.item.create' && e.item?.type === 'function_call_output');
          if (s) return s;
          await sleep(10);
        }
        return null;
      })();
      assert.ok(outSent, `the SDK sent no function_call_output: ${JSON.stringify(rec.sent.map((e) => e.type))}`);
      assert.equal(outSent.item.call_id, argsDone.event.call_id, 'function_call_output.call_id');
      // The script's first response says "Let me check…" and then calls; the answer follows the output.
      const outAdded = await waitFor(rec, { type: 'conversation.item.added', 'item.type': 'function_call_output' }, { timeoutMs: 5_000 });
      const answer = await waitFor(rec, { type: 'response.output_audio_transcript.done' }, { from: outAdded.index, timeoutMs: 10_000 });
      assert.match(answer.event.transcript, /Here is the weather in Paris:.*21/, 'the tool output is spoken');
      const done = await waitFor(rec, { type: 'response.done', 'response.id': answer.event.response_id }, { timeoutMs: 10_000 });
      assert.equal(done.event.response.status, 'completed');
      await sleep(200);
      assert.equal(toolCalls.length, 1, `execute() calls: ${JSON.stringify(toolCalls)}`);
      assert.deepEqual(toolCalls[0].args, { city: 'Paris', unit: 'celsius' });
      assert.ok(sdk.some((e) => e.type === 'agent_tool_end' && e.tool === 'get_weather'), `agent_tool_end: ${JSON.stringify(sdk.filter((e) => e.type !== 'audio'))}`);
      const answerAudio = rec.audio.filter((a) => a.responseId === answer.event.response_id);
      assert.ok(answerAudio.reduce((n, a) => n + a.bytes, 0) > PCM24_BYTES_PER_S / 2, 'the answer is spoken (audio events)');
      assert.ok(sdk.filter((e) => e.type === 'audio').length >= answerAudio.length, 'RealtimeSession re-emits the audio events');
      assert.deepEqual(sdk.filter((e) => e.type === 'error'), [], 'RealtimeSession errors');
      assert.deepEqual(rec.events.filter((e) => e.generic).map((e) => `${e.type}: ${e.schemaIssues}`), [], 'server events the SDK schema rejects');
      assertServerEventShapes(assert, rec.events, 'agents-websocket RealtimeSession tool');
      results.toolOutputToFirstAudioMs = Math.round(answerAudio[0].t - outSent.t);
      results.sendMessageToAnswerAudioMs = Math.round(answerAudio[0].t - tSend);
      console.log(
        `agents-websocket: RealtimeSession tool: get_weather(${argsDone.event.arguments}) executed, answer "${answer.event.transcript}"; ` +
          `function_call_output sent → first audio of the answer ${results.toolOutputToFirstAudioMs} ms; ` +
          `sendMessage → first audio of the answer ${results.sendMessageToAnswerAudioMs} ms (after the spoken "Let me check…" and the call)`,
      );
      session.close();
    } catch (err) {
      await dump('agents-websocket RealtimeSession', rec, err);
      throw err;
    }
  });

  test("raw ws: sub-protocols 'realtime' + 'openai-insecure-api-key.…' (echoed 'realtime'); tts in audio/pcmu and audio/pcm", { timeout: 30_000 }, async () => {
    const TEXT = 'One two three four five six seven.';
    const lengths = {};
    for (const fmt of [{ type: 'audio/pcm', rate: 24000 }, { type: 'audio/pcmu' }, { type: 'audio/pcma' }]) {
      const es = await openEventSocket(realtimeUrl(server, { model: 'tts' }), { protocols: ['realtime', 'openai-insecure-api-key.ek_test'] });
      closers.push(() => es.close());
      try {
        assert.equal(es.protocol, 'realtime', 'the server selects the realtime sub-protocol');
        const created = await es.waitFor({ type: 'session.created' }, { timeoutMs: 3_000 });
        assert.equal(created.index, 0, 'session.created first');
        es.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { format: fmt, turn_detection: null }, output: { format: fmt } } } });
        const upd = await es.waitFor({ type: 'session.updated' }, { timeoutMs: 3_000 });
        assert.equal(upd.event.session.audio?.output?.format?.type, fmt.type, `session.updated output format: ${JSON.stringify(upd.event.session.audio?.output)}`);
        const from = es.events.length;
        es.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: TEXT }] } });
        es.send({ type: 'response.create' });
        const rc = await es.waitFor({ type: 'response.created' }, { from, timeoutMs: 5_000 });
        await es.waitFor({ type: 'response.done', 'response.id': rc.event.response.id }, { from, timeoutMs: 15_000 });
        const r = checkWsResponse(es.events, rc.event.response.id);
        const bytesPerS = fmt.type === 'audio/pcm' ? PCM24_BYTES_PER_S : 8000;
        lengths[fmt.type] = { bytes: r.audioBytes, ms: Math.round((r.audioBytes / bytesPerS) * 1000), transcript: r.transcript };
        assert.ok(r.audioBytes > 0, `${fmt.type}: audio bytes`);
        assert.deepEqual(es.events.filter((e) => e.type === 'error'), [], `${fmt.type}: error events`);
        assertServerEventShapes(assert, es.events, `raw ws tts ${fmt.type}`);
      } catch (err) {
        console.error(`raw ws ${fmt.type} events:\n${wsEventDump(es.events, es.t0)}`);
        throw err;
      } finally {
        es.close();
      }
    }
    console.log(`agents-websocket: tts over raw ws, same text in each format: ${JSON.stringify(lengths)}`);
    // The same speech in each format: the same duration (G.711 is 8000 bytes a second, PCM16 24 kHz 48000).
    const ref = lengths['audio/pcm'].ms;
    for (const t of ['audio/pcmu', 'audio/pcma']) {
      assert.ok(Math.abs(lengths[t].ms - ref) <= Math.max(100, ref * 0.05), `${t} audio ${lengths[t].ms} ms vs audio/pcm ${ref} ms`);
    }
  });

  test('raw ws: loopback reflects appended audio as output_audio.delta (resp_loopback) at once', { timeout: 20_000 }, async () => {
    const es = await openEventSocket(realtimeUrl(server, { model: 'loopback' }), { headers: { Authorization: 'Bearer sk-test' } });
    closers.push(() => es.close());
    try {
      await es.waitFor({ type: 'session.created' }, { timeoutMs: 3_000 });
      const { samples } = speechFixture();
      const oneSecond = samples.subarray(0, 24000);
      const from = es.events.length;
      const sendTimes = [];
      const streamed = await streamRealtime(
        (buf) => {
          sendTimes.push(now());
          es.send({ type: 'input_audio_buffer.append', audio: Buffer.from(buf).toString('base64') });
        },
        oneSecond,
        { maxSilenceMs: 0 },
      );
      await sleep(500);
      const deltas = es.events.slice(from).filter((e) => e.type === 'response.output_audio.delta');
      const bytes = audioDeltaBytes(deltas);
      console.log(
        `agents-websocket: loopback: ${streamed.chunks} appends (${oneSecond.length * 2} bytes) → ${deltas.length} deltas, ${bytes} bytes; ` +
          `first append → first delta ${deltas.length ? (deltas[0].t - sendTimes[0]).toFixed(1) : '-'} ms, last append → last delta ${deltas.length ? (deltas[deltas.length - 1].t - sendTimes[sendTimes.length - 1]).toFixed(1) : '-'} ms; ` +
          `other events: ${JSON.stringify([...new Set(es.events.slice(from).map((e) => e.type))])}`,
      );
      assert.ok(deltas.length > 0, 'loopback sent no response.output_audio.delta');
      for (const d of deltas) assert.equal(d.response_id, 'resp_loopback', 'loopback delta response_id');
      assert.ok(Math.abs(bytes - oneSecond.length * 2) <= 2 * 960, `loopback returned ${bytes} bytes for ${oneSecond.length * 2} appended`);
      assert.deepEqual(es.events.filter((e) => e.type === 'error'), [], 'error events');
    } catch (err) {
      console.error(`raw ws loopback events:\n${wsEventDump(es.events, es.t0)}`);
      throw err;
    } finally {
      es.close();
    }
  });
});

/** Client events with runs of input_audio_buffer.append collapsed to one line. */
function collapseAppends(sent) {
  const out = [];
  for (const e of sent) {
    const last = out[out.length - 1];
    if (e.type === 'input_audio_buffer.append' && last?.type === 'input_audio_buffer.append') {
      last.count = (last.count ?? 1) + 1;
      last.bytes += e.bytes;
    } else out.push({ ...e });
  }
  return out;
}
