// Browser entry for browser-websocket.test.mjs, bundled with esbuild at test time: the official
// @openai/agents-realtime SDK's OpenAIRealtimeWebSocket transport, used on its own (no RealtimeSession), with
// an explicit `url` (ws://… voice-edge) and an ephemeral `ek_` key, which the SDK in a browser sends as the
// sub-protocols ['realtime', 'openai-insecure-api-key.<key>', 'openai-agents-sdk.<version>'].
//
// window.wsrt.connect({url, apiKey, timeoutMs}) resolves with {ok, connectMs} or {ok: false, error}; then
// window.wsrt.sendMessage(text) sends a text turn (conversation.item.create + response.create). What
// happens is recorded in `window.wsrt`, which the test reads through playwright:
//   events       every server event the transport surfaced as '*' (type, t ms, a few fields)
//   audio        every 'audio' event: {t, bytes, responseId}
//   errors       every transport 'error' event, described
//   status       connection_change history
//   sockets      the page's WebSockets (recorded by the inline script of the HTML): url, offered and chosen
//                sub-protocols, close code
import { OpenAIRealtimeWebSocket } from '@openai/agents-realtime';

const now = () => performance.now();

function describeError(e) {
  if (!e) return String(e);
  const inner = e.error ?? e;
  if (inner instanceof Error) return `${inner.name}: ${inner.message}`;
  if (typeof Event !== 'undefined' && inner instanceof Event) return `Event(${inner.type})`;
  try {
    return JSON.stringify(inner);
  } catch {
    return String(inner);
  }
}

const wsrt = {
  transport: null,
  events: [],
  audio: [],
  errors: [],
  status: [],
  get sockets() {
    return window.__sockets || [];
  },
};
window.wsrt = wsrt;

wsrt.connect = async ({ url, apiKey, model = 'echo', timeoutMs = 8_000 }) => {
  const transport = new OpenAIRealtimeWebSocket({ url });
  wsrt.transport = transport;
  transport.on('*', (ev) => {
    const rec = { t: now(), type: ev.type };
    if (ev.type === 'response.done') rec.response = { id: ev.response?.id, status: ev.response?.status, status_details: ev.response?.status_details ?? null };
    if (ev.type === 'response.created') rec.response = { id: ev.response?.id };
    if (ev.type === 'error') rec.error = ev.error;
    if (ev.type === 'session.created' || ev.type === 'session.updated') rec.session = { type: ev.session?.type, model: ev.session?.model, output: ev.session?.audio?.output?.format };
    if (ev.type === 'response.output_audio.delta') rec.bytes = Math.floor((ev.delta?.length ?? 0) * 3 / 4);
    if (ev.type === 'response.output_audio_transcript.done') rec.transcript = ev.transcript;
    wsrt.events.push(rec);
  });
  transport.on('audio', (a) => wsrt.audio.push({ t: now(), bytes: a.data.byteLength, responseId: a.responseId }));
  transport.on('error', (e) => wsrt.errors.push({ t: now(), error: describeError(e) }));
  transport.on('connection_change', (s) => wsrt.status.push({ t: now(), status: s }));
  const t0 = now();
  let timer;
  try {
    await Promise.race([
      transport.connect({ apiKey, model, url }),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`connect() did not settle within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return { ok: true, connectMs: now() - t0, status: transport.status };
  } catch (e) {
    return { ok: false, error: describeError(e), status: transport.status };
  } finally {
    clearTimeout(timer);
  }
};

wsrt.sendMessage = (text) => {
  wsrt.sentAt = now();
  wsrt.transport.sendMessage(text, {});
};

wsrt.close = () => wsrt.transport?.close();

wsrt.ready = true;
