// G.711 calls from Chromium: the plain Realtime WebRTC flow with RTCRtpTransceiver.setCodecPreferences
// limited to PCMU, then to PCMA (what telephony-flavoured pages do, e.g. OpenAI's agents demo with
// ?codec=pcmu). The answer must name that codec alone, and Chromium's own stats must show the audio it
// receives decoded as that codec: for loopback (its microphone reflected) and for a tts text message.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/g711.test.mjs
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT, launchBrowser, openPage, serverDiagnostics, startServer } from './harness.mjs';
import { eventDump, mintClientSecret, sleep, startStaticServer, waitForEvent } from './realtime-util.mjs';
import { PLAIN_PAGE_HTML as HTML } from './plain-page.mjs';

const TURN_WAV = path.join(REPO_ROOT, 'fixtures', 'turn.wav');
const CODECS = [
  { codec: 'pcmu', pt: 0, name: 'PCMU' },
  { codec: 'pcma', pt: 8, name: 'PCMA' },
];

/** The inbound audio's packet count and the codec its codecId resolves to, from getStats(). */
function inboundCodec(page) {
  return page.evaluate(async () => {
    const report = await window.rt.pc.getStats();
    let inbound = null;
    report.forEach((s) => {
      if (s.type === 'inbound-rtp' && s.kind === 'audio') inbound = s;
    });
    if (!inbound) return null;
    const codec = report.get(inbound.codecId);
    return {
      packetsReceived: inbound.packetsReceived ?? 0,
      totalAudioEnergy: inbound.totalAudioEnergy ?? 0,
      mimeType: codec?.mimeType,
      payloadType: codec?.payloadType,
      clockRate: codec?.clockRate,
    };
  });
}

async function waitForPackets(page, above, ms) {
  const deadline = Date.now() + ms;
  let s = null;
  while (Date.now() < deadline) {
    s = await inboundCodec(page);
    if (s && s.packetsReceived > above && s.mimeType) return s;
    await sleep(100);
  }
  return s;
}

describe('G.711 calls (setCodecPreferences PCMU / PCMA) in headless chromium', { timeout: 120_000 }, () => {
  let server = null;
  let pages = null;
  let browser = null;

  before(async () => {
    server = await startServer({ readyMs: 30_000 });
    pages = await startStaticServer({ '/': { type: 'text/html; charset=utf-8', body: HTML } });
    browser = await launchBrowser({ audioFile: TURN_WAV });
  });

  after(async () => {
    if (browser) await browser.close().catch(() => {});
    if (pages) await pages.close().catch(() => {});
    if (server) await server.stop().catch(() => {});
  });

  for (const { codec, pt, name } of CODECS) {
    for (const model of ['loopback', 'tts']) {
      test(`${name} only: ${model} answers in ${name} and Chromium decodes it`, { timeout: 40_000 }, async () => {
        const key = await mintClientSecret(server);
        const ctx = await openPage(browser, `${pages.origin}/`);
        const { page } = ctx;
        try {
          const baseUrl = server.baseUrl.replace(/\/$/, '');
          const started = await page.evaluate((o) => window.startPlain(o), { baseUrl, key: key.key, query: `?model=${model}`, codec });
          assert.equal(started.calls.status, 201);
          const sdp = await page.evaluate(() => ({ offer: window.rt.pc.localDescription.sdp, answer: window.rt.pc.remoteDescription.sdp }));
          const offerLine = sdp.offer.split('\r\n').find((l) => l.startsWith('m=audio'));
          assert.ok(!/opus/i.test(sdp.offer), `the offer still has Opus: ${offerLine}`);
          const mline = sdp.answer.split('\r\n').find((l) => l.startsWith('m=audio'));
          assert.match(mline, new RegExp(`SAVPF ${pt}$`), `answer m-line: ${mline}`);
          assert.ok(sdp.answer.includes(`a=rtpmap:${pt} ${name}/8000`), `answer:\n${sdp.answer}`);

          const created = await waitForEvent(page, { type: 'session.created' }, { timeoutMs: 5_000 });
          assert.equal(created.event.session.audio.output.format.type, `audio/${codec}`);

          let before = null;
          if (model === 'tts') {
            // The fake microphone talks a second in; without turn detection it cannot barge in.
            await page.evaluate(() => window.sendEvent({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } }));
            await waitForEvent(page, { type: 'session.updated' }, { timeoutMs: 3_000 });
            before = (await inboundCodec(page))?.packetsReceived ?? 0;
            await page.evaluate(() => {
              window.sendEvent({
                type: 'conversation.item.create',
                item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello from a telephone.' }] },
              });
              window.sendEvent({ type: 'response.create' });
            });
            const done = await waitForEvent(page, { type: 'response.done' }, { timeoutMs: 15_000 });
            assert.equal(done.event.response.status, 'completed', JSON.stringify(done.event.response));
            await waitForEvent(page, { type: 'output_audio_buffer.stopped' }, { timeoutMs: 15_000 });
          }
          const s = await waitForPackets(page, (before ?? 0) + 25, 5_000);
          assert.ok(s, 'no inbound-rtp audio stats');
          assert.equal(s.mimeType, `audio/${name}`, `inbound codec: ${JSON.stringify(s)}`);
          assert.equal(s.payloadType, pt);
          assert.equal(s.clockRate, 8000);
          assert.ok(s.packetsReceived > (before ?? 0) + 25, `packetsReceived ${before} → ${s.packetsReceived}`);
          if (model === 'tts') assert.ok(s.totalAudioEnergy > 0, `speech energy ${s.totalAudioEnergy}`);
          // For loopback the stream keeps flowing.
          const later = await waitForPackets(page, s.packetsReceived + 10, 3_000);
          if (model === 'loopback') assert.ok(later.packetsReceived > s.packetsReceived + 10, `${s.packetsReceived} → ${later.packetsReceived}`);
          console.log(`g711 ${name} ${model}: ${JSON.stringify(later)}`);
        } catch (err) {
          const rt = await page.evaluate(() => ({ events: window.rt.events, answer: window.rt.pc?.remoteDescription?.sdp })).catch(() => null);
          console.error(
            `\n===== g711 ${name} ${model} failure =====\nanswer:\n${rt?.answer}\nevents:\n${rt ? eventDump(rt.events) : '(none)'}\n` +
              `browser console:\n${ctx.consoleLines.join('\n')}\n${await serverDiagnostics(server, { adminPaths: ['/admin/calls'] })}`,
          );
          throw err;
        } finally {
          await ctx.context.close().catch(() => {});
        }
      });
    }
  }
});
