// Tool calls through the official @openai/agents-realtime SDK (pinned in package.json) in headless chromium:
// a RealtimeAgent with a `tool()` (get_weather, a JSON schema with `examples` and `enum`), session config
// `toolChoice: 'required'`, `session.sendMessage('What is get_weather for Paris?')`. voice-edge's stub model
// calls the tool; the SDK runs execute(), sends the function_call_output and a response.create by itself;
// the stub speaks the result back ("The get_weather tool returned: …") with audio over RTP.
//
// Run three times in one call and prints a timing table (page clock, median of the runs): message sent →
// execute() called, execute() returned → first transcript delta / first audio packet of the spoken answer /
// agent_end. Every server event is checked against the openai package's realtime.d.ts (openai-types.mjs).
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/realtime-sdk-tools.test.mjs
//
// The page is realtime-sdk.page.mjs (startSession({weatherTool: true, config})), served from another
// loopback origin, with a silent microphone so that only the text message makes turns.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { launchBrowser, openPage, serverDiagnostics, startServer } from './harness.mjs';
import { assertServerEventShapes } from './openai-types.mjs';
import {
  bundleBrowserEntry,
  checkResponse,
  eventDump,
  inboundAudio,
  mintClientSecret,
  pageEvents,
  sleep,
  startStaticServer,
  waitForEvent,
} from './realtime-util.mjs';

const FILE_TIMEOUT_MS = 90_000;
const RUNS = 3;
const TEXT = 'What is get_weather for Paris?';
const RESULT = JSON.stringify({ temperature_c: 21, conditions: 'sunny' }); // what the page's execute() returns
const UNITS = ['celsius', 'fahrenheit'];

const HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>agents-realtime tools e2e</title></head>
<body><p>@openai/agents-realtime tool calls against voice-edge</p><script type="module" src="/sdk.js"></script></body></html>`;

const median = (xs) => {
  const s = xs.filter((x) => typeof x === 'number').sort((a, b) => a - b);
  if (!s.length) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

describe('@openai/agents-realtime 0.20.0 tool() calls in headless chromium', { timeout: FILE_TIMEOUT_MS }, () => {
  let server = null;
  let pages = null;
  let browser = null;
  let ctx = null;

  before(async () => {
    const [srv, bundle] = await Promise.all([startServer({ readyMs: 30_000 }), bundleBrowserEntry('realtime-sdk.page.mjs')]);
    server = srv;
    pages = await startStaticServer({
      '/': { type: 'text/html; charset=utf-8', body: HTML },
      '/sdk.js': { type: 'text/javascript; charset=utf-8', body: bundle },
    });
    browser = await launchBrowser();
  });

  after(async () => {
    if (ctx) await ctx.context.close().catch(() => {});
    if (browser) await browser.close().catch(() => {});
    if (pages) await pages.close().catch(() => {});
    if (server) await server.stop().catch(() => {});
  });

  async function failureDump(err) {
    const parts = [];
    if (ctx?.page) {
      try {
        const rt = await ctx.page.evaluate(() => ({
          events: window.rt.events,
          sent: window.rt.sent,
          sdk: window.rt.sdk.filter((e) => e.type !== 'history_updated'),
          toolCalls: window.rt.toolCalls,
          warnings: window.rt.warnings,
          callId: window.rt.callId,
        }));
        parts.push(`call ${rt.callId}; tool calls: ${JSON.stringify(rt.toolCalls)}`);
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
    if (server) parts.push(await serverDiagnostics(server, { adminPaths: ['/admin/stats', '/admin/calls'] }));
    console.error(`\n===== agents-realtime tools failure diagnostics (${err?.message?.split('\n')[0]}) =====\n${parts.join('\n\n')}\n===== end diagnostics =====\n`);
  }

  test(`tool() with toolChoice 'required': execute() runs, the SDK sends the output, the answer is spoken (${RUNS} runs)`, { timeout: 60_000 }, async () => {
    try {
      const key = await mintClientSecret(server);
      ctx = await openPage(browser, `${pages.origin}/`);
      const { page } = ctx;
      await page.waitForFunction(() => window.rtReady === true, null, { timeout: 10_000 });
      const baseUrl = new URL('/v1/realtime/calls', server.baseUrl).href;
      const conn = await Promise.race([
        page.evaluate((o) => window.startSession(o), {
          baseUrl,
          apiKey: key.key,
          model: 'echo',
          silentMic: true,
          weatherTool: true,
          config: { toolChoice: 'required' },
        }),
        sleep(15_000).then(() => {
          throw new Error('session.connect() did not settle within 15 s');
        }),
      ]);
      assert.equal(conn.status, 'connected');

      // The SDK declared the tool and tool_choice in its session.update; the server took both.
      let { events, sent } = await pageEvents(page);
      const update = sent.find((e) => e.type === 'session.update' && e.session?.tools);
      assert.ok(update, `no session.update with tools: ${JSON.stringify(sent.map((e) => e.type))}`);
      assert.equal(update.session.tool_choice, 'required', 'session.update tool_choice');
      const declared = update.session.tools.find((t) => t.name === 'get_weather');
      assert.equal(declared?.type, 'function', `declared tools: ${JSON.stringify(update.session.tools)}`);
      assert.deepEqual(declared.parameters.properties.unit.enum, UNITS, 'the JSON schema reached the wire as written');
      const updated = await waitForEvent(page, { type: 'session.updated', 'session.tool_choice': 'required' }, { timeoutMs: 3_000 });
      assert.ok(updated.event.session.tools.some((t) => t.name === 'get_weather'), 'session.updated lists get_weather');

      await page.evaluate(() => window.watchInbound());
      const rows = [];
      for (let run = 1; run <= RUNS; run++) {
        ({ events, sent } = await pageEvents(page));
        const from = events.length;
        const sentFrom = sent.length;
        const sdkFrom = await page.evaluate(() => window.rt.sdk.filter((e) => e.type !== 'history_updated').length);
        const toolsFrom = await page.evaluate(() => window.rt.toolCalls.length);

        const tSend = await page.evaluate((text) => {
          const t = performance.now();
          window.rt.session.sendMessage(text);
          return t;
        }, TEXT);
        // The function call: arguments streamed, then done.
        const argsDone = await waitForEvent(page, { type: 'response.function_call_arguments.done' }, { from, timeoutMs: 5_000 });
        const callId = argsDone.event.call_id;
        // The SDK answers with the output, then a response.create; the stub speaks the result.
        await page.waitForFunction((n) => window.rt.toolCalls.length > n, toolsFrom, { timeout: 5_000 });
        const outputSentAt = await (async () => {
          for (let i = 0; i < 200; i++) {
            const s = await page.evaluate(() => window.rt.sent);
            const k = s.findIndex((e, j) => j >= sentFrom && e.type === 'conversation.item.create' && e.item?.type === 'function_call_output');
            if (k >= 0) return k;
            await sleep(25);
          }
          throw new Error('the SDK sent no function_call_output');
        })();
        const answerCreated = await waitForEvent(page, { type: 'response.created' }, { from: argsDone.index + 1, timeoutMs: 5_000 });
        const answerId = answerCreated.event.response.id;
        await waitForEvent(page, { type: 'output_audio_buffer.stopped', response_id: answerId }, { from: answerCreated.index, timeoutMs: 20_000 });
        await page
          .waitForFunction((n) => window.rt.sdk.filter((e) => e.type !== 'history_updated').slice(n).some((e) => e.type === 'agent_end' && e.text), sdkFrom, { timeout: 3_000 })
          .catch(() => {});
        ({ events, sent } = await pageEvents(page));
        const { sdk, toolCalls, inbound } = await page.evaluate(() => ({
          sdk: window.rt.sdk.filter((e) => e.type !== 'history_updated'),
          toolCalls: window.rt.toolCalls,
          inbound: window.rt.inbound,
        }));
        const mine = events.slice(from);
        const mySent = sent.slice(sentFrom);

        // The call: one get_weather call with schema-valid arguments, in the GA shape.
        const callResp = mine.find((e) => e.type === 'response.done' && e.response.output?.some((i) => i.type === 'function_call'));
        assert.ok(callResp, `no response.done with a function_call in run ${run}`);
        const calls = callResp.response.output.filter((i) => i.type === 'function_call');
        assert.deepEqual(calls.map((c) => c.name), ['get_weather'], 'one get_weather call');
        assert.equal(calls[0].call_id, callId, 'response.done lists the call of .done');
        assert.equal(argsDone.event.name, 'get_weather');
        const deltas = mine
          .filter((e) => e.type === 'response.function_call_arguments.delta' && e.call_id === callId)
          .map((e) => e.delta)
          .join('');
        assert.equal(deltas, argsDone.event.arguments, 'argument deltas add up to .done arguments');

        // execute() ran once for this call, with the arguments the model sent, valid for the schema.
        const exec = toolCalls.slice(toolsFrom);
        assert.equal(exec.length, 1, `execute() calls in run ${run}: ${JSON.stringify(exec)}`);
        const args = exec[0].args;
        assert.deepEqual(args, JSON.parse(argsDone.event.arguments), 'execute() got the streamed arguments');
        assert.equal(typeof args.city, 'string', `city: ${JSON.stringify(args)}`);
        assert.equal(args.city, 'Paris', 'city from the schema examples');
        assert.ok(UNITS.includes(args.unit), `unit in the enum: ${JSON.stringify(args)}`);
        assert.deepEqual(Object.keys(args).sort(), ['city', 'unit'], 'no other properties (additionalProperties: false)');
        assert.equal(exec[0].callId, callId, 'execute() details.toolCall.callId');

        // The SDK itself sent the output (for that call_id) and then response.create.
        const output = mySent[outputSentAt - sentFrom];
        assert.equal(output.item.call_id, callId, 'function_call_output.call_id');
        assert.equal(output.item.output, RESULT, 'function_call_output.output is the JSON of what execute() returned');
        assert.ok(
          mySent.slice(outputSentAt - sentFrom + 1).some((e) => e.type === 'response.create'),
          `response.create after the output: ${JSON.stringify(mySent.map((e) => e.type))}`,
        );
        const outAdded = mine.find((e) => e.type === 'conversation.item.added' && e.item?.type === 'function_call_output');
        assert.equal(outAdded?.item?.call_id, callId, 'the server added the function_call_output item');

        // The spoken answer: the full response cycle, transcript carrying the tool output, audio over RTP.
        const reply = checkResponse(assert, events, answerId);
        assert.ok(reply.transcript.includes(`The get_weather tool returned: ${RESULT}`), `answer transcript: ${reply.transcript}`);
        const sdkMine = sdk.slice(sdkFrom);
        const toolStart = sdkMine.find((e) => e.type === 'agent_tool_start');
        const toolEnd = sdkMine.find((e) => e.type === 'agent_tool_end');
        assert.equal(toolStart?.tool, 'get_weather', `agent_tool_start: ${JSON.stringify(sdkMine)}`);
        assert.equal(toolEnd?.result, RESULT, 'agent_tool_end result');
        const end = sdkMine.find((e) => e.type === 'agent_end' && e.text);
        assert.equal(end?.text, reply.transcript, `agent_end with the answer: ${JSON.stringify(sdkMine)}`);
        const tReturned = exec[0].tReturned;
        const firstPacket = inbound.find((s) => s.t > tReturned);
        const packetsBefore = [...inbound].reverse().find((s) => s.t <= tReturned)?.packets ?? 0;
        const packetsAfter = inbound[inbound.length - 1].packets;
        assert.ok(firstPacket && packetsAfter - packetsBefore > 25, `inbound audio packets ${packetsBefore} → ${packetsAfter} during the answer`);
        const firstDelta = reply.events.find((e) => e.type === 'response.output_audio_transcript.delta');
        const audioStarted = reply.events.find((e) => e.type === 'output_audio_buffer.started');

        rows.push({
          run,
          sendToExecute: exec[0].tCalled - tSend,
          returnToTranscriptDelta: firstDelta.t - tReturned,
          returnToAudioStarted: audioStarted.t - tReturned,
          returnToFirstPacket: firstPacket.t - tReturned,
          returnToAgentEnd: end.t - tReturned,
          sendToAgentEnd: end.t - tSend,
          packets: packetsAfter - packetsBefore,
          args: JSON.stringify(args),
        });
        await sleep(200); // the last packets of this answer land before the next run's baseline
      }
      await page.evaluate(() => window.stopInbound());

      // The timing table (page clock, ms).
      const cols = [
        ['sendToExecute', 'sendMessage → execute()'],
        ['returnToTranscriptDelta', 'execute() returned → 1st transcript delta'],
        ['returnToAudioStarted', 'execute() returned → output_audio_buffer.started'],
        ['returnToFirstPacket', 'execute() returned → 1st audio packet'],
        ['returnToAgentEnd', 'execute() returned → agent_end'],
        ['sendToAgentEnd', 'sendMessage → agent_end'],
      ];
      const f = (v) => (typeof v === 'number' ? v.toFixed(1) : '-');
      const lines = [
        `| step (ms, page clock) | ${rows.map((r) => `run ${r.run}`).join(' | ')} | median |`,
        `|---|${rows.map(() => '---:').join('|')}|---:|`,
        ...cols.map(([k, label]) => `| ${label} | ${rows.map((r) => f(r[k])).join(' | ')} | ${f(median(rows.map((r) => r[k])))} |`),
      ];
      console.log(
        `\nagents-realtime tool call timings (${RUNS} runs, one call, model echo, toolChoice required; arguments ${rows[0].args}; ` +
          `answer audio ${rows.map((r) => r.packets).join('/')} packets):\n${lines.join('\n')}\n` +
          'transcript deltas follow playback (a word is sent once played), so the first lands about one word after the ' +
          'audio starts; agent_end comes with response.done, once the whole answer has played.\n',
      );

      // No event the SDK's schema rejected, no SDK errors; every server event in the openai types' shapes.
      ({ events } = await pageEvents(page));
      assert.deepEqual(events.filter((e) => e.generic).map((e) => `${e.type}: ${e.schemaIssues}`), [], 'server events the SDK schema rejects');
      const sdkAll = await page.evaluate(() => window.rt.sdk.filter((e) => e.type === 'error'));
      assert.deepEqual(sdkAll, [], 'RealtimeSession error events');
      assertServerEventShapes(assert, events, 'agents-realtime tools (page)');

      // The server's own log of the call agrees: RUNS outputs and the responses they asked for.
      const res = await fetch(new URL(`/v1/realtime/calls/${conn.callId}/events`, server.baseUrl));
      assert.equal(res.status, 200, 'GET /v1/realtime/calls/{id}/events');
      const log = (await res.text()).trim().split('\n').map((l) => JSON.parse(l));
      const clientOutputs = log.filter((l) => l.dir === 'client' && l.event?.item?.type === 'function_call_output');
      assert.equal(clientOutputs.length, RUNS, 'function_call_output events the server received');
      assertServerEventShapes(assert, log.filter((l) => l.dir === 'server').map((l) => l.event), 'agents-realtime tools (server event log)');
    } catch (err) {
      await failureDump(err);
      throw err;
    }
  });
});
