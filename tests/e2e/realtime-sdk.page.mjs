// Browser entry for realtime-sdk.test.mjs, bundled with esbuild at test time. It runs the official
// @openai/agents-realtime SDK (RealtimeAgent + RealtimeSession over OpenAIRealtimeWebRTC) against voice-edge
// and records what happens in `window.rt`, which the test reads through playwright:
//   rt.events    every server event the SDK surfaced as `transport_event` (+ t ms, + whether the SDK's own
//                zod schema rejected it, which would make the SDK ignore it)
//   rt.sent      every client event the SDK wrote to the data channel
//   rt.sdk       RealtimeSession events (agent_start, agent_end, audio_stopped, error, history_updated …)
//   rt.warnings  console.warn / console.error lines (e.g. "Timed out waiting for session.updated ack")
//   rt.pc        the SDK's RTCPeerConnection (session.transport.connectionState.peerConnection)
//   rt.toolCalls every execute() of the get_weather tool (startSession({weatherTool: true})): its arguments,
//                when it was called and when it returned
//   rt.inbound   inbound audio packet counts whenever they change (window.watchInbound())
import { OpenAIRealtimeWebRTC, RealtimeAgent, RealtimeSession, tool } from '@openai/agents-realtime';
// The SDK's own server-event schema (same module instance the SDK uses; the package exports map hides it).
import { realtimeServerEventSchema } from './node_modules/@openai/agents-realtime/dist/openaiRealtimeEvents.mjs';

const now = () => performance.now();

const rt = {
  events: [],
  sent: [],
  sdk: [],
  warnings: [],
  pcs: [],
  pc: null,
  session: null,
  connectMs: null,
  connectError: null,
  callId: null,
  toolCalls: [],
  inbound: [],
};
window.rt = rt;

/** What the get_weather tool returns; the stub model speaks it back after the SDK sends it. */
const WEATHER_RESULT = { temperature_c: 21, conditions: 'sunny' };

/**
 * A function tool as an app writes it: a JSON schema (strict: every property required, no others) whose
 * `examples` and `enum` the stub model reads to make up arguments. execute() records what it got.
 */
const weatherTool = tool({
  name: 'get_weather',
  description: 'Get the current weather for a city.',
  parameters: {
    type: 'object',
    properties: {
      city: { type: 'string', description: 'The city name.', examples: ['Paris'] },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit.' },
    },
    required: ['city', 'unit'],
    additionalProperties: false,
  },
  strict: true,
  execute: async (args, _ctx, details) => {
    const call = { tCalled: now(), args, callId: details?.toolCall?.callId ?? null };
    rt.toolCalls.push(call);
    call.tReturned = now();
    return WEATHER_RESULT;
  },
});

for (const level of ['warn', 'error']) {
  const orig = console[level].bind(console);
  console[level] = (...args) => {
    rt.warnings.push({ t: now(), level, text: args.map((a) => (a instanceof Error ? a.message : String(a))).join(' ') });
    orig(...args);
  };
}

// Record the client events the SDK sends, and every peer connection it creates. The SDK looks up the global
// RTCPeerConnection when it connects, so replacing it here is enough.
const NativePC = window.RTCPeerConnection;
class RecordingPeerConnection extends NativePC {
  constructor(...args) {
    super(...args);
    rt.pcs.push(this);
  }
  createDataChannel(...args) {
    const dc = super.createDataChannel(...args);
    rt.dataChannel = { label: dc.label, ordered: dc.ordered, negotiated: dc.negotiated, protocol: dc.protocol };
    const send = dc.send.bind(dc);
    dc.send = (data) => {
      let ev;
      try {
        ev = typeof data === 'string' ? JSON.parse(data) : { binary: true };
      } catch {
        ev = { unparsable: String(data).slice(0, 200) };
      }
      rt.sent.push({ t: now(), ...ev });
      return send(data);
    };
    return dc;
  }
}
window.RTCPeerConnection = RecordingPeerConnection;

/** A silent microphone stream (for tests that must not speak). */
function silentStream() {
  const ac = new AudioContext();
  const src = ac.createConstantSource();
  src.offset.value = 0;
  const dst = ac.createMediaStreamDestination();
  src.connect(dst);
  src.start();
  return dst.stream;
}

function describeError(e) {
  if (!e) return String(e);
  const inner = e.error ?? e;
  if (inner instanceof Error) return `${inner.name}: ${inner.message}`;
  try {
    return JSON.stringify(inner);
  } catch {
    return String(inner);
  }
}

/**
 * Connect a RealtimeSession. opts: {baseUrl, apiKey, model, silentMic}. Resolves with {connectMs, callId}
 * once `session.connect()` resolved (or rejects with its error).
 */
window.startSession = async ({
  baseUrl,
  apiKey,
  model,
  silentMic = false,
  instructions = 'You are a voice-edge test agent.',
  weatherTool: withWeather = false,
  config,
}) => {
  const agent = new RealtimeAgent({ name: 'voice-edge-e2e', instructions, tools: withWeather ? [weatherTool] : [] });
  const transportOptions = { baseUrl };
  if (silentMic) transportOptions.mediaStream = silentStream();
  const transport = new OpenAIRealtimeWebRTC(transportOptions);
  const session = new RealtimeSession(agent, { transport, model, ...(config ? { config } : {}) });
  rt.session = session;

  session.on('transport_event', (ev) => {
    const check = realtimeServerEventSchema.safeParse(ev);
    const rec = { t: now(), ...ev };
    if (!check.success) {
      rec.generic = true;
      rec.schemaIssues = check.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`);
    }
    rt.events.push(rec);
  });
  session.on('agent_start', () => rt.sdk.push({ t: now(), type: 'agent_start' }));
  session.on('agent_end', (_ctx, _agent, text) => rt.sdk.push({ t: now(), type: 'agent_end', text }));
  session.on('audio_stopped', () => rt.sdk.push({ t: now(), type: 'audio_stopped' }));
  session.on('audio_interrupted', () => rt.sdk.push({ t: now(), type: 'audio_interrupted' }));
  session.on('history_added', (item) => rt.sdk.push({ t: now(), type: 'history_added', item: { itemId: item.itemId, role: item.role, type: item.type } }));
  session.on('error', (e) => rt.sdk.push({ t: now(), type: 'error', error: describeError(e) }));
  session.on('agent_tool_start', (_ctx, _agent, t, d) =>
    rt.sdk.push({ t: now(), type: 'agent_tool_start', tool: t.name, callId: d?.toolCall?.callId, arguments: d?.toolCall?.arguments }),
  );
  session.on('agent_tool_end', (_ctx, _agent, t, result, d) =>
    rt.sdk.push({ t: now(), type: 'agent_tool_end', tool: t.name, callId: d?.toolCall?.callId, result }),
  );
  session.on('history_updated', (history) =>
    rt.sdk.push({ t: now(), type: 'history_updated', items: history.map((i) => ({ type: i.type, role: i.role, name: i.name, status: i.status, output: i.output })) }),
  );

  const t0 = now();
  try {
    await session.connect({ apiKey });
  } catch (e) {
    rt.connectError = describeError(e);
    throw e;
  }
  rt.connectMs = now() - t0;
  rt.pc = session.transport.connectionState.peerConnection;
  rt.callId = session.transport.callId ?? null;
  return { connectMs: rt.connectMs, callId: rt.callId, pcIsRecorded: rt.pcs.includes(rt.pc), status: session.transport.status };
};

/** Inbound audio packet/energy samples every `everyMs` for `forMs`, e.g. around an interrupt. */
window.sampleInbound = async (forMs, everyMs = 10) => {
  const out = [];
  const end = now() + forMs;
  while (now() < end) {
    const report = await rt.pc.getStats();
    report.forEach((s) => {
      if (s.type === 'inbound-rtp' && s.kind === 'audio') {
        out.push({ t: now(), packets: s.packetsReceived ?? 0, energy: s.totalAudioEnergy ?? 0 });
      }
    });
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return out;
};

/**
 * Record the inbound audio packet count into rt.inbound ({t, packets}) every `everyMs` whenever it
 * changes, until window.stopInbound(): the page-clock time the first packet of a reply arrived.
 */
window.watchInbound = (everyMs = 5) => {
  let stop = false;
  window.stopInbound = () => (stop = true);
  (async () => {
    let last = -1;
    while (!stop) {
      const report = await rt.pc.getStats();
      report.forEach((s) => {
        if (s.type === 'inbound-rtp' && s.kind === 'audio' && (s.packetsReceived ?? 0) !== last) {
          last = s.packetsReceived ?? 0;
          rt.inbound.push({ t: now(), packets: last });
        }
      });
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
};

/**
 * session.interrupt() while sampling inbound audio: returns {tInterrupt, samples} where samples run from
 * `beforeMs` before the interrupt to `afterMs` after it.
 */
window.interruptAndSample = async ({ beforeMs = 300, afterMs = 1200 } = {}) => {
  const before = window.sampleInbound(beforeMs);
  const pre = await before;
  const tInterrupt = now();
  rt.session.interrupt();
  const post = await window.sampleInbound(afterMs);
  return { tInterrupt, samples: [...pre, ...post] };
};

window.rtReady = true;
