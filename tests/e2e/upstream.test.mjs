// The upstream bridge, end to end with real peers and no network: two voice-edge processes chained.
// The upstream is a second voice-edge's WebSocket door (its echo and script:weather stubs), which requires
// a key; the edge runs with --upstream ws://…/v1/realtime and that key in VOICE_EDGE_UPSTREAM_KEY. Callers
// reach the upstream's stubs through the edge by any name that is not one of the edge's own stubs
// (`gpt-realtime` gets the upstream's default, echo) or with `upstream:NAME`.
//
// A second edge fronts a misbehaving upstream this file starts (a WebSocket server that picks its
// misbehaviour from ?model=): it refuses with 401, never answers the upgrade, closes mid-response, or
// sends an `error` event. Each must reach the caller as an `error` event naming it, and end the call
// cleanly, while other calls on the same edge carry on.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/upstream.test.mjs
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { REPO_ROOT, launchBrowser, openDemo, openPage, pageState, rtcStats, serverDiagnostics, startCallAndWaitForAudio, startServer } from './harness.mjs';
import { firefoxDemoTurn, inboundAudioStats, launchFirefox, openFirefoxPage } from './firefox.mjs';
import { PLAIN_PAGE_HTML } from './plain-page.mjs';
import { LIVE_PAGE_HTML } from './live-page.mjs';
import { bundleBrowserEntry, pageEvents, sleep, startStaticServer, waitForEvent } from './realtime-util.mjs';

const TURN_WAV = path.join(REPO_ROOT, 'fixtures', 'turn.wav');
const BARGEIN_WAV = path.join(REPO_ROOT, 'fixtures', 'bargein.wav');
const KEY = `sk-upstream-e2e-${Math.random().toString(36).slice(2)}`;
const SDK_HTML = `<!doctype html><html><head><meta charset="utf-8"><title>upstream e2e</title></head>
<body><script type="module" src="/sdk.js"></script></body></html>`;

/** Everything a client was shown, to search for the key. */
const seen = [];

/** A WebSocket session on `server`'s door: its frames, and a way to wait for one. */
function openSocket(server, query) {
  const ws = new WebSocket(new URL(`/v1/realtime?${query}`, server.baseUrl).href.replace(/^http/, 'ws'), ['realtime']);
  const frames = [];
  const waiters = [];
  ws.on('message', (m) => {
    seen.push(String(m));
    const e = JSON.parse(String(m));
    frames.push(e);
    for (const w of [...waiters]) if (w.match(e)) w.resolve(e);
  });
  const closed = new Promise((resolve) => ws.on('close', (code) => resolve({ code, at: Date.now() })));
  const opened = new Promise((resolve, reject) => {
    ws.on('open', resolve);
    ws.on('error', reject);
  });
  const next = (match, ms = 10_000, what = JSON.stringify(match.toString())) =>
    new Promise((resolve, reject) => {
      const found = frames.find(match);
      if (found) return resolve(found);
      const w = { match, resolve };
      waiters.push(w);
      setTimeout(() => reject(new Error(`no ${what} within ${ms} ms; got ${frames.map((f) => f.type).join(', ')}`)), ms);
    });
  const send = (e) => ws.send(JSON.stringify(e));
  return { ws, frames, next, send, closed, opened };
}
const ofType = (type) => (e) => e.type === type;

/** A WebSocket upstream that misbehaves as ?model= says. */
async function startBadUpstream() {
  const wss = new WebSocketServer({ noServer: true });
  const stalled = [];
  const srv = http.createServer((req, res) => res.writeHead(404).end());
  srv.on('upgrade', (req, socket, head) => {
    const model = new URL(req.url, 'http://x').searchParams.get('model');
    if (model === 'refuse') {
      const body = JSON.stringify({ error: { type: 'invalid_request_error', code: 'invalid_api_key', message: `Incorrect API key provided: ${req.headers.authorization?.slice(7)}` } });
      socket.end(`HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      return;
    }
    if (model === 'stall') {
      stalled.push(socket); // never answered; closed at the end
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const send = (e) => ws.send(JSON.stringify({ event_id: `evt_${Math.random()}`, ...e }));
      send({ type: 'session.created', session: { type: 'realtime', audio: { input: { turn_detection: { type: 'server_vad' } } } } });
      ws.on('message', (m) => {
        const e = JSON.parse(String(m));
        if (e.type === 'session.update') send({ type: 'session.updated', session: { type: 'realtime', ...e.session } });
        if (e.type === 'response.create') {
          send({ type: 'response.created', response: { id: 'resp_bad', status: 'in_progress' } });
          if (model === 'drop') setTimeout(() => ws.terminate(), 100);
          if (model === 'error') send({ type: 'error', error: { type: 'server_error', code: 'model_overloaded', message: 'The model is overloaded.' } });
        }
      });
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `ws://127.0.0.1:${srv.address().port}/v1/realtime`,
    close: async () => {
      for (const s of stalled) s.destroy();
      wss.close();
      await new Promise((r) => srv.close(r));
    },
  };
}

describe('upstream bridge: an edge in front of another voice-edge', { timeout: 200_000 }, () => {
  let upstream = null; // the model server (voice-edge's WebSocket door, key required)
  let edge = null; // --upstream to it
  let bad = null; // a misbehaving upstream
  let badEdge = null; // --upstream to that
  let pages = null;
  let chromium = null;
  const browsers = [];

  before(async () => {
    [upstream, bad] = await Promise.all([
      startServer({ extraArgs: ['--require-keys'], env: { VOICE_EDGE_API_KEYS: KEY } }),
      startBadUpstream(),
    ]);
    const [e1, e2, sdk] = await Promise.all([
      startServer({ extraArgs: ['--upstream', `ws://${upstream.httpAddr}/v1/realtime`], env: { VOICE_EDGE_UPSTREAM_KEY: KEY } }),
      startServer({ extraArgs: ['--upstream', bad.url], env: { VOICE_EDGE_UPSTREAM_KEY: KEY } }),
      bundleBrowserEntry('realtime-sdk.page.mjs'),
    ]);
    [edge, badEdge] = [e1, e2];
    pages = await startStaticServer({
      '/': { type: 'text/html; charset=utf-8', body: PLAIN_PAGE_HTML },
      '/sdk.html': { type: 'text/html; charset=utf-8', body: SDK_HTML },
      '/sdk.js': { type: 'text/javascript; charset=utf-8', body: sdk },
      '/live.html': { type: 'text/html; charset=utf-8', body: LIVE_PAGE_HTML },
    });
    chromium = await launchBrowser({ audioFile: TURN_WAV });
    browsers.push(chromium);
  });

  after(async () => {
    for (const b of browsers) await b.close().catch(() => {});
    if (pages) await pages.close().catch(() => {});
    for (const s of [edge, badEdge, upstream]) if (s) await s.stop().catch(() => {});
    if (bad) await bad.close().catch(() => {});
  });

  async function failureDump(err, page) {
    const parts = [`${err.message}`];
    if (page) parts.push(`page: ${JSON.stringify(await pageState(page).catch(() => null))}`);
    if (page) {
      const rt = await page.evaluate(() => window.rt && { events: window.rt.events.map((e) => e.type + (e.type === 'error' ? JSON.stringify(e.error) : '')), sent: window.rt.sent.map((e) => e.type), sdk: window.rt.sdk, toolCalls: window.rt.toolCalls }).catch(() => null);
      if (rt) parts.push(`rt: ${JSON.stringify(rt).slice(0, 6000)}`);
    }
    for (const [name, s] of [['edge', edge], ['upstream', upstream], ['bad edge', badEdge]]) {
      if (s) parts.push(`--- ${name} ---\n${await serverDiagnostics(s, { adminPaths: ['/admin/calls'], logLines: 60 })}`);
    }
    console.error(parts.join('\n'));
  }

  test('demo page in Chromium: the upstream model is the default, a spoken turn comes back, the event log shows both directions', { timeout: 60_000 }, async () => {
    const ctx = await openDemo(chromium, edge.baseUrl);
    const { page } = ctx;
    try {
      assert.equal(await page.evaluate(() => window.voiceEdge.upstream), 'gpt-realtime', 'the page offers the upstream model');
      assert.equal(await page.$eval('#model', (e) => e.value), 'gpt-realtime', 'and chooses it');
      const st = await startCallAndWaitForAudio(page, { timeoutMs: 25_000 });
      await page.waitForFunction(() => window.voiceEdge.events.includes('output_audio_buffer.stopped'), null, { timeout: 10_000 });
      const stats = await rtcStats(page);
      assert.ok(stats.inbound.packetsReceived > 25 && stats.inbound.totalAudioEnergy > 0, `audio back: ${JSON.stringify(stats.inbound)}`);
      const events = await page.evaluate(() => window.voiceEdge.events);
      assert.equal(events[0], 'session.created');
      for (const t of ['input_audio_buffer.speech_started', 'input_audio_buffer.committed', 'response.created', 'output_audio_buffer.started', 'response.done', 'output_audio_buffer.stopped']) {
        assert.ok(events.includes(t), `${t} missing: ${events.join(', ')}`);
      }
      assert.ok(!events.includes('response.output_audio.delta'), 'no audio deltas on oai-events (WebRTC never sends them)');
      // The edge's event log: what the page sent, and what the upstream answered.
      const id = await page.evaluate(() => window.voiceEdge.path.callId);
      const log = await (await fetch(new URL(`/v1/realtime/calls/${id}/events`, edge.baseUrl))).text();
      seen.push(log);
      const lines = log.trim().split('\n').map((l) => JSON.parse(l));
      const dirs = new Set(lines.map((l) => `${l.dir}:${l.event?.type}`));
      assert.ok([...dirs].some((d) => d.startsWith('client') && d.endsWith('session.update')), `the page's session.update is logged: ${[...dirs].join(' ')}`);
      assert.ok([...dirs].some((d) => d.startsWith('server') && d.endsWith('response.done')), `the upstream's response.done is logged: ${[...dirs].join(' ')}`);
      seen.push(await (await fetch(edge.baseUrl)).text(), await (await fetch(new URL('/demo/config.json', edge.baseUrl))).text());
      console.log(`upstream demo: ${events.length} events; first audio ${Math.round(st.timings.firstAudio)} ms after Start`);
    } catch (e) {
      await failureDump(e, page);
      throw e;
    } finally {
      await ctx.context.close().catch(() => {});
    }
  });

  test('@openai/agents-realtime over WebRTC: a spoken turn, then a barge-in that clears and truncates', { timeout: 60_000 }, async () => {
    const bargeBrowser = await launchBrowser({ audioFile: BARGEIN_WAV });
    browsers.push(bargeBrowser);
    const ctx = await openPage(bargeBrowser, `${pages.origin}/sdk.html`);
    const { page } = ctx;
    try {
      await page.waitForFunction(() => window.rtReady === true, null, { timeout: 10_000 });
      const baseUrl = new URL('/v1/realtime/calls', edge.baseUrl).href;
      const conn = await page.evaluate((o) => window.startSession(o), { baseUrl, apiKey: 'ek_unused', model: 'gpt-realtime' });
      assert.ok(conn.connectMs < 5000, `connect() took ${conn.connectMs} ms`);
      const cleared = await waitForEvent(page, { type: 'output_audio_buffer.cleared' }, { timeoutMs: 25_000, what: 'the barge-in clearing the buffer' });
      const truncated = await waitForEvent(page, { type: 'conversation.item.truncated' }, { timeoutMs: 5_000 });
      const { events } = await pageEvents(page);
      seen.push(JSON.stringify(events));
      const respId = cleared.event.response_id;
      const started = events.findIndex((e) => e.type === 'output_audio_buffer.started' && e.response_id === respId);
      const barge = events.findIndex((e, i) => i > started && e.type === 'input_audio_buffer.speech_started');
      assert.ok(started >= 0 && started < barge && barge < cleared.index, 'playing, then speech, then cleared');
      const transcript = events.find((e) => e.type === 'response.output_audio_transcript.done' && e.response_id === respId)?.transcript;
      assert.match(transcript ?? '', /^Echoing your/, 'the upstream echo answered the first turn');
      const item = events.find((e) => e.type === 'response.output_item.added' && e.response_id === respId)?.item?.id;
      assert.equal(truncated.event.item_id, item, 'the assistant item is truncated');
      assert.ok(truncated.event.audio_end_ms > 0, `truncated at ${truncated.event.audio_end_ms} ms`);
      assert.ok(!events.some((e, i) => i > started && e.type === 'output_audio_buffer.stopped' && e.response_id === respId), 'a cleared playout never reports stopped');
      assert.ok(!events.some((e) => e.type === 'error'), `no error: ${JSON.stringify(events.filter((e) => e.type === 'error'))}`);
      console.log(`upstream agents-realtime: connect ${Math.round(conn.connectMs)} ms; "${transcript}" truncated at ${truncated.event.audio_end_ms} ms`);
    } catch (e) {
      await failureDump(e, page);
      throw e;
    } finally {
      await ctx.context.close().catch(() => {});
    }
  });

  test('@openai/agents-realtime over WebRTC: a text message to the upstream script, its tool run by the SDK, the answer spoken', { timeout: 40_000 }, async () => {
    const ctx = await openPage(chromium, `${pages.origin}/sdk.html`);
    const { page } = ctx;
    try {
      await page.waitForFunction(() => window.rtReady === true, null, { timeout: 10_000 });
      // The SDK names its model only in session.update, after the call is placed; the edge picks the
      // upstream model when the call is created, so the script is named in the URL.
      const baseUrl = new URL('/v1/realtime/calls?model=upstream:script:weather', edge.baseUrl).href;
      await page.evaluate((o) => window.startSession(o), { baseUrl, apiKey: 'ek_unused', model: 'gpt-realtime', silentMic: true, weatherTool: true });
      await page.evaluate(() => window.rt.session.sendMessage('How is the weather?'));
      await page.waitForFunction(() => window.rt.toolCalls.length > 0, null, { timeout: 10_000 });
      const args = await page.evaluate(() => window.rt.toolCalls[0].args ?? window.rt.toolCalls[0].arguments);
      assert.equal((typeof args === 'string' ? JSON.parse(args) : args).city, 'Paris', `tool arguments ${JSON.stringify(args)}`);
      // The SDK sent the output and asked for a response: the script speaks the tool's result.
      const outputAt = await waitForEvent(page, { type: 'conversation.item.added', 'item.type': 'function_call_output' }, { timeoutMs: 5_000 });
      const said = await waitForEvent(page, { type: 'response.output_audio_transcript.done' }, { from: outputAt.index, timeoutMs: 10_000, what: 'the answer' });
      const answer = await waitForEvent(page, { type: 'output_audio_buffer.stopped', response_id: said.event.response_id }, { timeoutMs: 15_000, what: 'the answer played out' });
      const { events } = await pageEvents(page);
      seen.push(JSON.stringify(events));
      const transcript = said.event.transcript;
      assert.ok(transcript && transcript.length > 0, 'the answer has a transcript');
      assert.ok(!events.some((e) => e.type === 'error'), `no error: ${JSON.stringify(events.filter((e) => e.type === 'error'))}`);
      console.log(`upstream tool call over WebRTC: ${JSON.stringify(args)} → "${transcript}" (stopped at event ${answer.index})`);
    } catch (e) {
      await failureDump(e, page);
      throw e;
    } finally {
      await ctx.context.close().catch(() => {});
    }
  });

  test('Live over WebRTC (POST /v1/live/sessions) bridged to the upstream Live WebSocket: started under the edge id, a spoken turn answered', { timeout: 40_000 }, async () => {
    const ctx = await openPage(chromium, `${pages.origin}/live.html`);
    const { page } = ctx;
    try {
      const baseUrl = edge.baseUrl.replace(/\/$/, '');
      const created = await page.evaluate((o) => window.startLive(o), { baseUrl, session: { model: 'gpt-live-1', instructions: 'Echo the caller.' } });
      assert.equal(created.status, 201);
      const first = (await pageEvents(page)).events[0];
      assert.equal(first.type, 'session.started', 'session.started is the first event');
      assert.equal(first.session.id, created.body.session.id, "the edge's id, which the app holds");
      assert.equal(first.session.instructions, 'Echo the caller.');
      // The upstream's model owns the turn: it answers the spoken sentence on its own.
      await waitForEvent(page, { type: 'session.output_transcript.delta' }, { timeoutMs: 15_000, what: 'the answer' });
      const deadline = Date.now() + 10_000;
      let audio = null;
      while (Date.now() < deadline) {
        audio = await page.evaluate(async () => {
          let out = null;
          (await window.rt.pc.getStats()).forEach((s) => {
            if (s.type === 'inbound-rtp' && s.kind === 'audio') out = { packets: s.packetsReceived, energy: s.totalAudioEnergy };
          });
          return out;
        });
        if (audio && audio.packets > 50 && audio.energy > 0) break;
        await sleep(200);
      }
      assert.ok(audio && audio.packets > 50 && audio.energy > 0, `the answer's audio: ${JSON.stringify(audio)}`);
      const { events } = await pageEvents(page);
      seen.push(JSON.stringify(events));
      assert.ok(!events.some((e) => e.type === 'session.output_audio.delta'), 'audio travels on the track, not the channel');
      await page.evaluate(() => window.sendEvent({ type: 'session.close', event_id: 'bye' }));
      const closed = await waitForEvent(page, { type: 'session.closed' }, { timeoutMs: 5_000 });
      assert.equal(closed.event.reason, 'close_requested');
    } catch (e) {
      await failureDump(e, page);
      throw e;
    } finally {
      await ctx.context.close().catch(() => {});
    }
  });

  test('G.711 (PCMU) caller with a loss fault on its leg: the turn still comes back, in PCMU', { timeout: 60_000 }, async () => {
    const ctx = await openPage(chromium, `${pages.origin}/`);
    const { page } = ctx;
    try {
      const baseUrl = edge.baseUrl.replace(/\/$/, '');
      const started = await page.evaluate((o) => window.startPlain(o), { baseUrl, key: 'unused', query: '?model=gpt-realtime', codec: 'pcmu' });
      assert.equal(started.calls.status, 201);
      const res = await fetch(new URL(`${started.calls.location}/faults`, edge.baseUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'network', loss: 0.05, direction: 'from_client' }),
      });
      assert.equal(res.status, 200, await res.text());
      const created = await waitForEvent(page, { type: 'session.created' }, { timeoutMs: 10_000 });
      assert.equal(created.event.session.audio.output.format.type, 'audio/pcmu', 'shown as the call has it');
      await waitForEvent(page, { type: 'output_audio_buffer.stopped' }, { timeoutMs: 25_000, what: 'the echoed turn played out' });
      const codec = await page.evaluate(async () => {
        let out = null;
        const report = await window.rt.pc.getStats();
        report.forEach((s) => {
          if (s.type === 'inbound-rtp' && s.kind === 'audio') out = { packets: s.packetsReceived, mime: report.get(s.codecId)?.mimeType };
        });
        return out;
      });
      assert.equal(codec.mime, 'audio/PCMU');
      assert.ok(codec.packets > 25, `PCMU packets back: ${codec.packets}`);
    } catch (e) {
      await failureDump(e, page);
      throw e;
    } finally {
      await ctx.context.close().catch(() => {});
    }
  });

  test('Firefox: the demo page, a push-to-talk turn answered by the upstream', { timeout: 60_000 }, async () => {
    const firefox = await launchFirefox();
    browsers.push(firefox);
    const { page } = await openFirefoxPage(firefox, edge.baseUrl);
    try {
      await page.waitForFunction(() => document.querySelector('#model').value === 'gpt-realtime', { timeout: 5_000 });
      const st = await firefoxDemoTurn(page);
      for (const ev of ['session.created', 'response.created', 'output_audio_buffer.started', 'response.done', 'output_audio_buffer.stopped']) {
        assert.ok(st.events.includes(ev), `${ev} missing: ${st.events.join(', ')}`);
      }
      const audio = await inboundAudioStats(page);
      assert.ok(audio && audio.packetsReceived > 25, `inbound-rtp: ${JSON.stringify(audio)}`);
    } catch (e) {
      await failureDump(e);
      throw e;
    }
  });

  test('WebSocket door: a tool call from the upstream script, and a sideband on a bridged WebRTC call', { timeout: 40_000 }, async () => {
    const s = openSocket(edge, 'model=upstream:script:weather');
    await s.opened;
    await s.next(ofType('session.created'));
    s.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'weather?' }] } });
    s.send({ type: 'response.create' });
    const args = await s.next(ofType('response.function_call_arguments.done'));
    assert.equal(JSON.parse(args.arguments).city, 'Paris');
    s.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: args.call_id, output: '{"temperature_c":21}' } });
    s.send({ type: 'response.create' });
    await s.next((e) => e.type === 'response.done' && e.response.id !== args.response_id && e.response.status === 'completed');
    assert.ok(s.frames.some((e) => e.type === 'response.output_audio.delta'), 'audio deltas pass through on a WebSocket');
    s.ws.close();

    // A sideband on a bridged WebRTC call: it steers the upstream conversation.
    const ctx = await openPage(chromium, `${pages.origin}/`);
    try {
      const baseUrl = edge.baseUrl.replace(/\/$/, '');
      const started = await ctx.page.evaluate((o) => window.startPlain(o), { baseUrl, key: 'unused', query: '?model=gpt-realtime' });
      await waitForEvent(ctx.page, { type: 'session.created' }, { timeoutMs: 10_000 });
      const callId = started.calls.location.split('/').pop();
      const side = openSocket(edge, `call_id=${callId}`);
      await side.opened;
      await side.next(ofType('session.created'));
      side.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'from the sideband' }] } });
      side.send({ type: 'response.create' });
      const done = await side.next(ofType('response.done'), 15_000);
      assert.equal(done.response.status, 'completed');
      await waitForEvent(ctx.page, { type: 'response.done' }, { timeoutMs: 5_000, what: 'the same response on the call' });
      side.ws.close();
    } finally {
      await ctx.context.close().catch(() => {});
    }
  });

  test('a misbehaving upstream: refused, stalled, dropped mid-response or failing is an error the caller sees, and other calls carry on', { timeout: 40_000 }, async () => {
    // A healthy call on the same edge (its own echo stub) runs throughout.
    const healthy = openSocket(badEdge, 'model=echo');
    await healthy.opened;
    await healthy.next(ofType('session.created'));
    const cases = {
      refuse: 'upstream_unauthorized',
      stall: 'upstream_timeout',
      drop: 'upstream_disconnected',
    };
    const runs = Object.entries(cases).map(async ([model, code]) => {
      const t0 = Date.now();
      const s = openSocket(badEdge, `model=${model}`);
      await s.opened;
      if (model === 'drop') {
        await s.next(ofType('session.created'));
        s.send({ type: 'response.create' });
      }
      const err = await s.next(ofType('error'), 12_000, `${model}'s error`);
      assert.equal(err.error.code, code, `${model}: ${JSON.stringify(err.error)}`);
      const closed = await Promise.race([s.closed, sleep(5_000).then(() => null)]);
      assert.ok(closed, `${model}: the session ended after its error`);
      return { model, code, message: err.error.message, ms: Date.now() - t0 };
    });
    // Meanwhile the healthy call takes a turn.
    healthy.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'still here?' }] } });
    healthy.send({ type: 'response.create' });
    const healthyDone = await healthy.next(ofType('response.done'), 10_000);
    const results = await Promise.all(runs);
    assert.equal(healthyDone.response.status, 'completed');
    const refused = results.find((r) => r.model === 'refuse');
    assert.match(refused.message, /HTTP 401 \(invalid_api_key/);
    // An upstream's own error event passes to the caller as it is; the session goes on.
    const failing = openSocket(badEdge, 'model=error');
    await failing.opened;
    await failing.next(ofType('session.created'));
    failing.send({ type: 'response.create' });
    const err = await failing.next(ofType('error'));
    assert.equal(err.error.code, 'model_overloaded');
    failing.ws.close();
    healthy.ws.close();
    console.log(`upstream failures: ${results.map((r) => `${r.model} → ${r.code} in ${r.ms} ms`).join('; ')}`);
  });

  test('the upstream key is never shown: not in pages, answers, events, sideband frames or the edge log', async () => {
    seen.push(await (await fetch(new URL('/health', edge.baseUrl))).text());
    seen.push(await (await fetch(new URL('/health', badEdge.baseUrl))).text());
    seen.push(edge.log(), badEdge.log());
    const found = seen.filter((t) => t.includes(KEY));
    assert.deepEqual(found.map((t) => t.slice(0, 200)), [], 'the key appeared');
    assert.ok(seen.length > 10, `searched ${seen.length} texts`);
  });
});
