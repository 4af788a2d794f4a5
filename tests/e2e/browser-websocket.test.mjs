// The official @openai/agents-realtime SDK's WebSocket transport (OpenAIRealtimeWebSocket) in headless
// chromium against voice-edge's Realtime WebSocket, `ws://127.0.0.1:<http port>/v1/realtime?model=echo`,
// with an ephemeral `ek_` key the test mints from a server key (the server runs with --require-keys). A
// browser cannot set headers on a WebSocket, so the SDK offers the key as a sub-protocol
// (`openai-insecure-api-key.<key>` beside `realtime`); the server must choose `realtime`.
//
// The page (browser-websocket.page.mjs, bundled with esbuild at test time) is served from another
// loopback origin than voice-edge.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/browser-websocket.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { launchBrowser, openPage, serverDiagnostics, startServer } from './harness.mjs';
import { bundleBrowserEntry, sleep, startStaticServer } from './realtime-util.mjs';

const SERVER_KEY = 'sk-voice-edge-e2e-browser-websocket';
const FILE_TIMEOUT_MS = 90_000;
const SDK_VERSION = '0.20.0';

// The inline script runs before the bundle: it records every WebSocket the page opens (the SDK takes
// globalThis.WebSocket when its module is evaluated), with the sub-protocols offered and chosen.
const HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>agents-realtime websocket e2e</title>
<script>
window.__sockets = [];
const NativeWebSocket = window.WebSocket;
window.WebSocket = class RecordingWebSocket extends NativeWebSocket {
  constructor(url, protocols) {
    super(url, protocols);
    const rec = { url: String(url), offered: protocols === undefined ? null : [].concat(protocols), protocol: null, opened: false, error: false, close: null };
    window.__sockets.push(rec);
    this.addEventListener('open', () => { rec.opened = true; rec.protocol = this.protocol; });
    this.addEventListener('error', () => { rec.error = true; });
    this.addEventListener('close', (e) => { rec.close = { code: e.code, reason: e.reason, wasClean: e.wasClean }; });
  }
};
</script></head>
<body><p>@openai/agents-realtime OpenAIRealtimeWebSocket against voice-edge</p><script type="module" src="/ws.js"></script></body></html>`;

/** POST /v1/realtime/client_secrets with the server key, as an app backend would. Returns the ek_ value. */
async function mintEphemeral(server) {
  const res = await fetch(new URL('/v1/realtime/client_secrets', server.baseUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${SERVER_KEY}` },
    body: JSON.stringify({ expires_after: { anchor: 'created_at', seconds: 600 }, session: { type: 'realtime', model: 'echo' } }),
    signal: AbortSignal.timeout(5_000),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `POST /v1/realtime/client_secrets → ${res.status}: ${text}`);
  const body = JSON.parse(text);
  assert.match(body.value, /^ek_/, `client secret: ${text}`);
  return body.value;
}

/** page.evaluate bounded by `timeoutMs` (playwright's evaluate has no timeout of its own). */
function evaluateWithin(page, timeoutMs, fn, arg) {
  let timer;
  return Promise.race([
    page.evaluate(fn, arg),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`page.evaluate did not settle within ${timeoutMs} ms`)), timeoutMs);
    }),
  ]).finally(() => clearTimeout(timer));
}

const pageState = (page) =>
  page.evaluate(() => ({
    events: window.wsrt.events,
    audio: window.wsrt.audio,
    errors: window.wsrt.errors,
    status: window.wsrt.status,
    sockets: window.wsrt.sockets,
    sentAt: window.wsrt.sentAt ?? null,
  }));

describe(`@openai/agents-realtime ${SDK_VERSION} (OpenAIRealtimeWebSocket) in headless chromium, ek_ key as a sub-protocol`, { timeout: FILE_TIMEOUT_MS }, () => {
  let server = null;
  let pages = null;
  let browser = null;
  const contexts = [];

  before(async () => {
    const [srv, bundle] = await Promise.all([
      startServer({ readyMs: 30_000, extraArgs: ['--require-keys', '--api-key', SERVER_KEY] }),
      bundleBrowserEntry('browser-websocket.page.mjs'),
    ]);
    server = srv;
    pages = await startStaticServer({
      '/': { type: 'text/html; charset=utf-8', body: HTML },
      '/ws.js': { type: 'text/javascript; charset=utf-8', body: bundle },
    });
    browser = await launchBrowser();
    console.log(`browser websocket: page origin ${pages.origin}, voice-edge ${server.baseUrl}`);
  });

  after(async () => {
    for (const c of contexts) await c.context.close().catch(() => {});
    if (browser) await browser.close().catch(() => {});
    if (pages) await pages.close().catch(() => {});
    if (server) await server.stop().catch(() => {});
  });

  async function newPage() {
    const ctx = await openPage(browser, `${pages.origin}/`);
    contexts.push(ctx);
    await ctx.page.waitForFunction(() => window.wsrt?.ready === true, null, { timeout: 10_000 });
    return ctx;
  }

  async function failureDump(ctx, err) {
    const parts = [`failure: ${err.stack || err}`];
    if (ctx) {
      try {
        const st = await pageState(ctx.page);
        const { events, ...rest } = st;
        parts.push(`page state: ${JSON.stringify({ ...rest, audio: `${st.audio.length} audio events` })}`);
        parts.push(`events (${events.length}):\n${events.map((e) => `  ${e.t.toFixed(0)} ${JSON.stringify(e).slice(0, 300)}`).join('\n')}`);
      } catch (e) {
        parts.push(`(could not read the page: ${e.message})`);
      }
      parts.push(`browser console (${ctx.consoleLines.length} lines):\n${ctx.consoleLines.join('\n')}`);
    }
    if (server) parts.push(await serverDiagnostics(server, { logLines: 80 }));
    console.error(parts.join('\n\n'));
  }

  test('an ek_ key: connect, a text message (sendMessage) comes back as audio and the response completes', { timeout: 30_000 }, async () => {
    let ctx = null;
    try {
      const key = await mintEphemeral(server);
      ctx = await newPage();
      const { page } = ctx;
      const url = `ws://${server.httpAddr}/v1/realtime?model=echo`;
      const conn = await evaluateWithin(page, 12_000, (arg) => window.wsrt.connect(arg), { url, apiKey: key, timeoutMs: 8_000 });
      assert.ok(conn.ok, `connect() failed: ${conn.error}`);

      const socket = (await pageState(page)).sockets[0];
      assert.equal(socket.url, url, 'the SDK opened the given url');
      assert.ok(socket.offered.includes('realtime') && socket.offered.includes(`openai-insecure-api-key.${key}`), `offered sub-protocols: ${socket.offered}`);
      assert.equal(socket.protocol, 'realtime', 'the server chose the realtime sub-protocol');

      // session.created first (it arrives right after open; connect() resolves on open, having sent the SDK's
      // session.update, which the server acknowledges with session.updated).
      await page.waitForFunction(() => window.wsrt.events.some((e) => e.type === 'session.created'), null, { timeout: 5_000, polling: 20 });
      await page.evaluate((text) => window.wsrt.sendMessage(text), 'hello from the browser over a websocket');
      await page.waitForFunction(() => window.wsrt.events.some((e) => e.type === 'response.done'), null, { timeout: 15_000, polling: 20 });
      await sleep(100); // let any straggling events land
      const st = await pageState(page);
      assert.equal(st.events[0].type, 'session.created', `first event: ${st.events[0].type}`);
      const done = st.events.find((e) => e.type === 'response.done');
      assert.equal(done.response.status, 'completed', `response.done: ${JSON.stringify(done.response)}`);
      const mine = st.audio.filter((a) => a.responseId === done.response.id);
      const bytes = mine.reduce((n, a) => n + a.bytes, 0);
      assert.ok(mine.length > 0 && mine.length === st.audio.length, `audio events for ${done.response.id}: ${mine.length} of ${st.audio.length}`);
      assert.ok(bytes > 48 * 300, `audio bytes back: ${bytes}`);
      const types = st.events.map((e) => e.type);
      for (const want of ['session.updated', 'response.created', 'response.output_audio.delta', 'response.output_audio.done', 'response.output_audio_transcript.done']) {
        assert.ok(types.includes(want), `no ${want}: ${JSON.stringify(types)}`);
      }
      assert.deepEqual(types.filter((t) => t.startsWith('output_audio_buffer.')), [], 'WebRTC-only events on a WebSocket');
      assert.deepEqual(st.events.filter((e) => e.type === 'error'), [], 'server error events');
      assert.deepEqual(st.errors, [], 'transport errors');
      const firstAudioMs = mine[0].t - st.sentAt;
      const transcript = st.events.find((e) => e.type === 'response.output_audio_transcript.done')?.transcript;
      console.log(
        `browser websocket: connect ${conn.connectMs.toFixed(0)} ms (sub-protocol ${socket.protocol}); sendMessage → first audio event ` +
          `${firstAudioMs.toFixed(0)} ms; ${mine.length} audio events, ${bytes} bytes (${(bytes / 48).toFixed(0)} ms of 24 kHz PCM16); ` +
          `response.done ${done.response.status}; transcript ${JSON.stringify(transcript)}`,
      );
      await page.evaluate(() => window.wsrt.close());
    } catch (err) {
      await failureDump(ctx, err);
      throw err;
    }
  });

  test('a bogus ek_ key is refused: connect() fails and the socket never opens', { timeout: 20_000 }, async () => {
    let ctx = null;
    try {
      ctx = await newPage();
      const { page } = ctx;
      const url = `ws://${server.httpAddr}/v1/realtime?model=echo`;
      const conn = await evaluateWithin(page, 12_000, (arg) => window.wsrt.connect(arg), { url, apiKey: 'ek_bogus00000000000000000000000000', timeoutMs: 8_000 });
      assert.equal(conn.ok, false, 'connect() with a bogus key must fail');
      assert.doesNotMatch(conn.error, /did not settle/, `connect() hung: ${conn.error}`);
      const st = await pageState(page);
      assert.equal(st.sockets.length, 1);
      assert.equal(st.sockets[0].opened, false, 'the socket never opened');
      assert.ok(st.sockets[0].error, 'the socket reported an error');
      assert.deepEqual(st.events, [], 'no server events');
      console.log(`browser websocket: bogus ek_ key → connect() rejected (${conn.error}); socket close ${JSON.stringify(st.sockets[0].close)}`);
    } catch (err) {
      await failureDump(ctx, err);
      throw err;
    }
  });
});
