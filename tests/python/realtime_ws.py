#!/usr/bin/env python3
"""The official `openai` Python package (pinned in requirements.txt) against voice-edge's Realtime
WebSocket transport (`GET /v1/realtime?model=…`).

    tests/python/.venv/bin/python tests/python/realtime_ws.py --base-url http://127.0.0.1:PORT/v1

Each check opens its own connection with `AsyncOpenAI(...).realtime.connect(...)`, the client's own
http→ws mapping of `base_url`, and drives it only through the client's methods
(`session.update`, `input_audio_buffer.append`, `conversation.item.create`, `response.create`):

  spoken         model echo, audio/pcm 24 kHz: fixtures/speech.wav (48 kHz) decimated to 24 kHz plus 1 s of
                 silence, appended in real-time-paced chunks; server VAD ends the turn and echo replays it
  text           model echo: a user text message + response.create; the reply is speech saying it
  pcmu           model echo, session.update to audio/pcmu both ways: the same speech as 8 kHz G.711 μ-law;
                 the reply is μ-law (8000 bytes a second)
  transcription  `?intent=transcription` (extra_query; the client has no named parameter for it): a
                 transcription session, VAD turns give input_audio_transcription.delta/.completed, no responses
  key_session    `client.realtime.client_secrets.create(session=…)` with instructions, a tool and
                 tool_choice "required", then a second client holding only the ek_ key: session.created
                 carries the minted session and a text turn calls the tool with no session.update

Every server event is validated against the package's own pydantic model for its `type`.
Prints ONE JSON object on stdout (results and measurements); exits 1 if any check failed, 2 on a usage
error. Every wait is bounded; the whole run stays under --deadline seconds (default 60).
"""

from __future__ import annotations

import argparse
import array
import asyncio
import base64
import itertools
import json
import math
import operator
import sys
import time
import traceback
import typing
import wave
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SPEECH_WAV = REPO_ROOT / "fixtures" / "speech.wav"

CHECKS = ("spoken", "text", "pcmu", "transcription", "key_session")
TEXT = "hello there"
# The server VAD's defaults (docs/realtime-protocol.md §5): a turn ends after this much silence.
SILENCE_DURATION_MS = 500
# What counts as speech when this script finds the fixture's speech end: the VAD's absolute floor at the
# default threshold 0.5 (src/audio/vad.rs: −58 + 20·0.5 dBFS).
SPEECH_DBFS = -48.0


class CheckFailed(Exception):
    pass


# ----------------------------------------------------------------------------------------------------------
# Audio, in pure Python (no numpy, no audioop)
# ----------------------------------------------------------------------------------------------------------


def read_wav_mono16(path: Path) -> tuple[list[int], int]:
    with wave.open(str(path), "rb") as w:
        if w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise SystemExit(f"{path}: need mono 16-bit PCM, got {w.getparams()}")
        rate = w.getframerate()
        data = w.readframes(w.getnframes())
    a = array.array("h")
    a.frombytes(data)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tolist(), rate


def lowpass_taps(factor: int, ntaps: int) -> list[float]:
    """Windowed-sinc (Blackman) low-pass for decimation by `factor`: cutoff at 0.45 of the new rate."""
    fc = 0.45 / factor  # cycles per input sample
    mid = (ntaps - 1) / 2
    taps = []
    for n in range(ntaps):
        x = n - mid
        sinc = 2 * fc if x == 0 else math.sin(2 * math.pi * fc * x) / (math.pi * x)
        win = 0.42 - 0.5 * math.cos(2 * math.pi * n / (ntaps - 1)) + 0.08 * math.cos(4 * math.pi * n / (ntaps - 1))
        taps.append(sinc * win)
    s = sum(taps)
    return [t / s for t in taps]


def decimate(samples: list[int], factor: int, ntaps: int) -> list[int]:
    """Low-pass filter and keep every `factor`-th sample; the output is aligned with the input (no delay)."""
    taps = lowpass_taps(factor, ntaps)
    half = (ntaps - 1) // 2
    padded = [0] * half + samples + [0] * half
    out = []
    mul = operator.mul
    for i in range(0, len(samples), factor):
        v = sum(map(mul, taps, padded[i : i + ntaps]))
        out.append(max(-32768, min(32767, int(round(v)))))
    return out


def pcm16_bytes(samples: list[int]) -> bytes:
    a = array.array("h", samples)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def pcm16_samples(data: bytes) -> list[int]:
    a = array.array("h")
    a.frombytes(data[: len(data) // 2 * 2])
    if sys.byteorder == "big":
        a.byteswap()
    return a.tolist()


# G.711 μ-law. Encoding is the ITU-T G.191 software tool library's reference (g711.c, linear2ulaw): the 16-bit
# sample cut to 14 bits (one's complement for negatives), biased by 33, segment and 4-bit step, bits inverted.
# Decoding is the classic table (bias 0x84).
ULAW_BIAS = 0x84


def linear_to_ulaw(x: int) -> int:
    absno = ((~x) >> 2) + 33 if x < 0 else (x >> 2) + 33
    if absno > 0x1FFF:
        absno = 0x1FFF
    i = absno >> 6
    segno = 1
    while i:
        segno += 1
        i >>= 1
    high = 0x8 - segno
    low = 0xF - ((absno >> segno) & 0xF)
    out = (high << 4) | low
    return out | 0x80 if x >= 0 else out


def ulaw_to_linear(u: int) -> int:
    u = ~u & 0xFF
    exponent = (u >> 4) & 0x07
    s = (((u & 0x0F) << 3) + ULAW_BIAS) << exponent
    s -= ULAW_BIAS
    return -s if u & 0x80 else s


ULAW_DECODE = [ulaw_to_linear(u) for u in range(256)]


def ulaw_encode(samples: list[int]) -> bytes:
    table = {}
    out = bytearray(len(samples))
    for i, s in enumerate(samples):
        u = table.get(s)
        if u is None:
            u = table[s] = linear_to_ulaw(s)
        out[i] = u
    return bytes(out)


def ulaw_decode(data: bytes) -> list[int]:
    return [ULAW_DECODE[b] for b in data]


def frame_dbfs(samples: list[int], rate: int, frame_ms: int = 20) -> list[float]:
    n = rate * frame_ms // 1000
    out = []
    for i in range(0, len(samples) - n + 1, n):
        fr = samples[i : i + n]
        ms = sum(x * x for x in fr) / n
        out.append(-120.0 if ms <= 0 else 10 * math.log10(ms / (32768.0 * 32768.0)))
    return out


def speech_span_ms(samples: list[int], rate: int, frame_ms: int = 20) -> tuple[int, int] | None:
    """[start, end) of the frames louder than SPEECH_DBFS, in ms of the signal."""
    levels = frame_dbfs(samples, rate, frame_ms)
    loud = [i for i, d in enumerate(levels) if d > SPEECH_DBFS]
    if not loud:
        return None
    return loud[0] * frame_ms, (loud[-1] + 1) * frame_ms


def envelope_similarity(a: list[int], b: list[int], rate: int, max_lag_frames: int = 40) -> float:
    """Best Pearson correlation of the 20 ms dB envelopes of `a` and `b` over lags of ±max_lag_frames:
    near 1 when `b` is `a` played back (whatever the gain, codec or a little shift)."""
    ea, eb = frame_dbfs(a, rate), frame_dbfs(b, rate)
    best = -1.0
    for lag in range(-max_lag_frames, max_lag_frames + 1):
        pairs = [(ea[i], eb[i + lag]) for i in range(len(ea)) if 0 <= i + lag < len(eb)]
        if len(pairs) < 25:
            continue
        xs, ys = zip(*pairs)
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxy = sum((x - mx) * (y - my) for x, y in pairs)
        sxx = sum((x - mx) ** 2 for x in xs)
        syy = sum((y - my) ** 2 for y in ys)
        if sxx > 0 and syy > 0:
            best = max(best, sxy / math.sqrt(sxx * syy))
    return best


class Clip:
    """The fixture's speech plus trailing silence, at one rate and encoding, cut into send chunks."""

    def __init__(self, samples: list[int], rate: int, encoding: str, chunk_ms: int, extra_silence_ms: int):
        self.rate = rate
        self.encoding = encoding
        self.samples = samples + [0] * (rate * extra_silence_ms // 1000)
        self.span = speech_span_ms(self.samples, rate)
        if self.span is None:
            raise SystemExit("fixture has no speech louder than %.0f dBFS" % SPEECH_DBFS)
        data = pcm16_bytes(self.samples) if encoding == "audio/pcm" else ulaw_encode(self.samples)
        self.bytes_per_ms = len(data) / (len(self.samples) * 1000 / rate)
        step = int(round(self.bytes_per_ms * chunk_ms))
        self.chunk_ms = chunk_ms
        self.chunks = [data[i : i + step] for i in range(0, len(data), step)]
        # Index of the chunk holding the last speech frame.
        self.last_speech_chunk = (self.span[1] - 1) // chunk_ms

    @property
    def duration_ms(self) -> float:
        return len(self.samples) * 1000 / self.rate

    def decode(self, data: bytes) -> list[int]:
        return pcm16_samples(data) if self.encoding == "audio/pcm" else ulaw_decode(data)


# ----------------------------------------------------------------------------------------------------------
# Event collection and schema checks
# ----------------------------------------------------------------------------------------------------------


def event_models() -> dict[str, type]:
    """type string → the package's pydantic model for that server event."""
    from openai.types.realtime import RealtimeServerEvent

    union = typing.get_args(RealtimeServerEvent)[0]
    out = {}
    for cls in typing.get_args(union):
        (t,) = typing.get_args(cls.model_fields["type"].annotation)
        out[t] = cls
    return out


class Session:
    """One connection's received events, each stamped with loop time, read by a background task."""

    def __init__(self, conn, models: dict[str, type], loop: asyncio.AbstractEventLoop):
        self.conn = conn
        self.models = models
        self.loop = loop
        self.events: list[tuple[float, dict]] = []
        self.schema_errors: list[str] = []
        self.closed: str | None = None
        self.cond = asyncio.Condition()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            while True:
                raw = await self.conn.recv_bytes()
                t = self.loop.time()
                try:
                    ev = json.loads(raw)
                except ValueError:
                    self.schema_errors.append(f"not JSON: {raw[:200]!r}")
                    continue
                self._validate(ev)
                async with self.cond:
                    self.events.append((t, ev))
                    self.cond.notify_all()
        except ConnectionClosed as e:
            self.closed = f"closed: code {e.rcvd.code if e.rcvd else None} {e.rcvd.reason if e.rcvd else ''}".strip()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            self.closed = f"reader failed: {e!r}"
        async with self.cond:
            self.cond.notify_all()

    def _validate(self, ev) -> None:
        if not isinstance(ev, dict):
            self.schema_errors.append(f"not an object: {str(ev)[:200]}")
            return
        t = ev.get("type")
        if not isinstance(ev.get("event_id"), str) and t != "error":
            self.schema_errors.append(f"{t}: no string event_id")
        cls = self.models.get(t)
        if cls is None:
            self.schema_errors.append(f"{t!r}: not a server event type of the openai package")
            return
        try:
            cls.model_validate(ev)
        except Exception as e:  # pydantic.ValidationError
            errs = getattr(e, "errors", lambda: [])()
            detail = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in errs[:4]) or str(e)[:300]
            self.schema_errors.append(f"{t} does not validate as {cls.__name__}: {detail}")

    def types(self, since: int = 0) -> list[str]:
        return [e.get("type") for _, e in self.events[since:]]

    def sequence(self, since: int = 0) -> list[str]:
        """The event types in order, runs of one type shown once as "type ×N"."""
        out: list[str] = []
        for t, run in itertools.groupby(self.types(since)):
            n = len(list(run))
            out.append(f"{t} ×{n}" if n > 1 else str(t))
        return out

    def find(self, type_: str, since: int = 0, pred=None) -> tuple[float, dict] | None:
        for t, e in self.events[since:]:
            if e.get("type") == type_ and (pred is None or pred(e)):
                return t, e
        return None

    def all(self, type_: str, since: int = 0) -> list[tuple[float, dict]]:
        return [(t, e) for t, e in self.events[since:] if e.get("type") == type_]

    async def wait(self, type_: str, timeout: float, since: int = 0, pred=None) -> tuple[float, dict]:
        """The first `type_` event at or after index `since` (matching `pred`); CheckFailed after `timeout` s."""

        def ready():
            return self.find(type_, since, pred) or (self.closed and "closed")

        try:
            async with self.cond:
                await asyncio.wait_for(self.cond.wait_for(ready), timeout)
        except asyncio.TimeoutError:
            raise CheckFailed(
                f"no {type_} within {timeout:.1f} s; events since #{since}: {self.sequence(since)[-30:]}"
            ) from None
        hit = self.find(type_, since, pred)
        if hit is None:
            raise CheckFailed(f"connection {self.closed} before {type_}; events since #{since}: {self.sequence(since)[-30:]}")
        return hit

    def errors(self) -> list[dict]:
        return [e for _, e in self.events if e.get("type") == "error"]

    async def stop(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):
            pass


# ----------------------------------------------------------------------------------------------------------
# The checks
# ----------------------------------------------------------------------------------------------------------


class Run:
    def __init__(self, args):
        self.args = args
        self.loop = asyncio.get_running_loop()
        self.models = event_models()
        from openai import AsyncOpenAI

        self.client = AsyncOpenAI(api_key=args.api_key, base_url=args.base_url, max_retries=0, timeout=10.0)

    def ms(self, a: float, b: float) -> float:
        return round((b - a) * 1000.0, 1)

    async def open(self, result: dict, **connect_kwargs):
        """Enter client.realtime.connect(...) and start reading; returns (manager, conn, session)."""
        mgr = self.client.realtime.connect(**connect_kwargs)
        t0 = self.loop.time()
        conn = await asyncio.wait_for(mgr.enter(), self.args.step_timeout)
        sess = Session(conn, self.models, self.loop)
        _, created = await sess.wait("session.created", self.args.step_timeout)
        result["connect_ms"] = self.ms(t0, sess.events[0][0])
        if sess.events[0][1].get("type") != "session.created":
            raise CheckFailed(f"first event is {sess.events[0][1].get('type')}, not session.created")
        result["session_created"] = created.get("session")
        return mgr, conn, sess

    async def close(self, mgr, sess: Session | None) -> None:
        if sess is not None:
            await sess.stop()
        try:
            await asyncio.wait_for(mgr.__aexit__(None, None, None), 5)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass

    def common_checks(self, sess: Session, result: dict) -> None:
        """Every connection: no output_audio_buffer.* (WebSocket has none), no error events."""
        oab = sorted({t for t in sess.types() if t and t.startswith("output_audio_buffer.")})
        if oab:
            result["failures"].append(f"output_audio_buffer.* events on a WebSocket: {oab}")
        for e in sess.errors():
            result["failures"].append(f"error event: {json.dumps(e.get('error'))[:400]}")
        result["schema_errors"] = sess.schema_errors[:20]

    async def send_clip(self, conn, clip: Clip, result: dict) -> tuple[float, float]:
        """Append the clip in real-time-paced chunks. Returns (first chunk's send time, send time of the
        chunk holding the last speech frame)."""
        t0 = self.loop.time()
        sent_at = []
        step = clip.chunk_ms / 1000.0
        for i, chunk in enumerate(clip.chunks):
            delay = t0 + i * step - self.loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await conn.input_audio_buffer.append(audio=base64.b64encode(chunk).decode("ascii"))
            sent_at.append(self.loop.time())
        lateness = [sent_at[i] - (t0 + i * step) for i in range(len(sent_at))]
        result["send"] = {
            "chunks": len(clip.chunks),
            "chunk_ms": clip.chunk_ms,
            "audio_ms": round(clip.duration_ms),
            "speech_ms": list(clip.span),
            "max_late_ms": round(max(lateness) * 1000, 1),
        }
        return t0, sent_at[clip.last_speech_chunk]

    async def spoken_turn(self, conn, sess: Session, clip: Clip, result: dict) -> None:
        """One VAD turn answered by echo: events, latency, reply size and likeness to what was sent."""
        a = self.args
        since = len(sess.events)
        sender = asyncio.create_task(self.send_clip(conn, clip, result))
        try:
            t_started, started = await sess.wait("input_audio_buffer.speech_started", clip.duration_ms / 1000 + a.step_timeout, since)
            t_stopped, stopped = await sess.wait("input_audio_buffer.speech_stopped", clip.duration_ms / 1000 + a.step_timeout, since)
            await sess.wait("input_audio_buffer.committed", a.step_timeout, since, lambda e: e.get("item_id") == stopped.get("item_id"))
            _, created = await sess.wait("response.created", a.step_timeout, since)
            rid = (created.get("response") or {}).get("id")
            t_first, _ = await sess.wait("response.output_audio.delta", a.step_timeout, since, lambda e: e.get("response_id") == rid)
            t_done, done = await sess.wait(
                "response.done", a.reply_timeout, since, lambda e: (e.get("response") or {}).get("id") == rid
            )
            t0, t_speech_end = await asyncio.wait_for(sender, a.step_timeout)
        finally:
            if not sender.done():
                sender.cancel()
        status = (done.get("response") or {}).get("status")
        if status != "completed":
            result["failures"].append(f"response.done status {status!r}, not 'completed': {json.dumps(done.get('response'))[:400]}")
        deltas = [e for _, e in sess.all("response.output_audio.delta", since) if e.get("response_id") == rid]
        audio = b"".join(base64.b64decode(e.get("delta") or "") for e in deltas)
        transcript = "".join(e.get("delta") or "" for _, e in sess.all("response.output_audio_transcript.delta", since))
        tdone = sess.find("response.output_audio_transcript.done", since)
        start_ms, end_ms = started.get("audio_start_ms"), stopped.get("audio_end_ms")
        turn_ms = (end_ms - start_ms) if isinstance(start_ms, int) and isinstance(end_ms, int) else None
        reply_ms = len(audio) / clip.bytes_per_ms
        speech_ms = clip.span[1] - clip.span[0]
        result.update(
            {
                "response_id": rid,
                "status": status,
                "events": sess.sequence(since),
                "audio_deltas": len(deltas),
                "audio_bytes": len(audio),
                "bytes_per_second": round(clip.bytes_per_ms * 1000),
                "reply_ms": round(reply_ms),
                "speech_ms": speech_ms,
                "turn_ms": turn_ms,
                "audio_start_ms": start_ms,
                "audio_end_ms": end_ms,
                "transcript": transcript,
                "transcript_done": tdone[1].get("transcript") if tdone else None,
                "latency_ms": self.ms(t_speech_end, t_first),
                "speech_stopped_ms": self.ms(t_speech_end, t_stopped),
                "stopped_to_audio_ms": self.ms(t_stopped, t_first),
                "speech_started_after_onset_ms": self.ms(t0 + clip.span[0] / 1000, t_started),
                # Where the server's speech end (audio_end_ms less the VAD's silence) falls on this script's
                # clock, relative to the speech end found here from the signal (positive: server later).
                "server_speech_end_offset_ms": (
                    round((end_ms - SILENCE_DURATION_MS) - clip.span[1]) if isinstance(end_ms, int) else None
                ),
                "reply_duration_ms": self.ms(t_first, t_done),
            }
        )
        if not deltas:
            result["failures"].append("no response.output_audio.delta")
            return
        # Echo replays [audio_start_ms, audio_end_ms) of the input: the speech (plus padding and silence).
        expect_lo = speech_ms * 0.9
        expect_hi = (turn_ms if turn_ms else speech_ms + 1000) * 1.1 + 200
        if not expect_lo <= reply_ms <= expect_hi:
            result["failures"].append(
                f"reply is {reply_ms:.0f} ms of {clip.encoding} ({len(audio)} bytes), expected {expect_lo:.0f}..{expect_hi:.0f} ms "
                f"(speech {speech_ms} ms, turn {turn_ms} ms)"
            )
        if turn_ms and abs(reply_ms - turn_ms) > max(150.0, 0.08 * turn_ms):
            result["failures"].append(f"reply is {reply_ms:.0f} ms, the turn (audio_end_ms - audio_start_ms) {turn_ms} ms")
        sim = envelope_similarity(clip.samples, clip.decode(audio), clip.rate)
        result["envelope_similarity"] = round(sim, 3)
        if sim < 0.7:
            result["failures"].append(f"reply does not sound like the input: envelope correlation {sim:.2f} < 0.7")

    async def check_spoken(self, result: dict) -> None:
        mgr, conn, sess = await self.open(result, model=self.args.model)
        try:
            fmt = (((result["session_created"] or {}).get("audio") or {}).get("output") or {}).get("format") or {}
            if fmt.get("type") != "audio/pcm":
                result["failures"].append(f"session.created audio.output.format is {fmt}, expected audio/pcm (the default)")
            if (result["session_created"] or {}).get("type") != "realtime":
                result["failures"].append(f"session.created session.type is {(result['session_created'] or {}).get('type')!r}")
            await self.spoken_turn(conn, sess, self.pcm24, result)
            self.common_checks(sess, result)
        finally:
            await self.close(mgr, sess)

    async def check_key_session(self, result: dict) -> None:
        from openai import AsyncOpenAI

        a = self.args
        tool = {
            "type": "function",
            "name": "get_weather",
            "description": "Get the current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }
        secret = await self.client.realtime.client_secrets.create(
            session={"type": "realtime", "instructions": "A weather bot.", "tools": [tool], "tool_choice": "required"}
        )
        if not secret.value.startswith("ek_"):
            raise CheckFailed(f"minted {secret.value!r}, not an ek_ key")
        browser = AsyncOpenAI(api_key=secret.value, base_url=a.base_url, max_retries=0, timeout=10.0)
        mgr = browser.realtime.connect(model=a.model)
        conn = await asyncio.wait_for(mgr.enter(), a.step_timeout)
        sess = Session(conn, self.models, self.loop)
        try:
            _, created = await sess.wait("session.created", a.step_timeout)
            s = created.get("session") or {}
            if s.get("instructions") != "A weather bot.":
                result["failures"].append(f"session.created instructions {s.get('instructions')!r}")
            if [t.get("name") for t in s.get("tools") or []] != ["get_weather"]:
                result["failures"].append(f"session.created tools {s.get('tools')!r}")
            since = len(sess.events)
            await conn.conversation.item.create(
                item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]}
            )
            await conn.response.create()
            _, args = await sess.wait("response.function_call_arguments.done", a.reply_timeout, since)
            result.update({"tool": args.get("name"), "arguments": args.get("arguments"), "events": sess.sequence(since)})
            if args.get("name") != "get_weather":
                result["failures"].append(f"called {args.get('name')!r}")
            self.common_checks(sess, result)
        finally:
            await self.close(mgr, sess)
            await browser.close()

    async def check_text(self, result: dict) -> None:
        a = self.args
        mgr, conn, sess = await self.open(result, model=a.model)
        try:
            since = len(sess.events)
            await conn.conversation.item.create(
                item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": TEXT}]}
            )
            await sess.wait("conversation.item.done", a.step_timeout, since)
            t_sent = self.loop.time()
            await conn.response.create()
            _, created = await sess.wait("response.created", a.step_timeout, since)
            rid = (created.get("response") or {}).get("id")
            t_first, _ = await sess.wait("response.output_audio.delta", a.step_timeout, since, lambda e: e.get("response_id") == rid)
            t_tdelta, _ = await sess.wait("response.output_audio_transcript.delta", a.reply_timeout, since)
            _, tdone = await sess.wait("response.output_audio_transcript.done", a.reply_timeout, since)
            t_done, done = await sess.wait(
                "response.done", a.reply_timeout, since, lambda e: (e.get("response") or {}).get("id") == rid
            )
            deltas = [e for _, e in sess.all("response.output_audio.delta", since) if e.get("response_id") == rid]
            audio = b"".join(base64.b64decode(e.get("delta") or "") for e in deltas)
            samples = pcm16_samples(audio)
            span = speech_span_ms(samples, 24000)
            status = (done.get("response") or {}).get("status")
            transcript = "".join(e.get("delta") or "" for _, e in sess.all("response.output_audio_transcript.delta", since))
            result.update(
                {
                    "response_id": rid,
                    "status": status,
                    "events": sess.sequence(since),
                    "audio_deltas": len(deltas),
                    "audio_bytes": len(audio),
                    "reply_ms": round(len(audio) / 48),
                    "reply_speech_ms": (span[1] - span[0]) if span else 0,
                    "transcript": transcript,
                    "transcript_done": tdone.get("transcript"),
                    "latency_ms": self.ms(t_sent, t_first),
                    "first_transcript_delta_ms": self.ms(t_sent, t_tdelta),
                    "reply_duration_ms": self.ms(t_first, t_done),
                }
            )
            if status != "completed":
                result["failures"].append(f"response.done status {status!r}, not 'completed'")
            if not span or span[1] - span[0] < 300:
                result["failures"].append(f"reply audio has no speech ({len(audio)} bytes, speech span {span})")
            if TEXT not in (tdone.get("transcript") or "").lower():
                result["failures"].append(f"transcript {tdone.get('transcript')!r} does not contain {TEXT!r}")
            if transcript != tdone.get("transcript"):
                result["failures"].append(f"transcript deltas {transcript!r} != transcript done {tdone.get('transcript')!r}")
            self.common_checks(sess, result)
        finally:
            await self.close(mgr, sess)

    async def check_pcmu(self, result: dict) -> None:
        a = self.args
        mgr, conn, sess = await self.open(result, model=a.model)
        try:
            since = len(sess.events)
            await conn.session.update(
                session={
                    "type": "realtime",
                    "audio": {"input": {"format": {"type": "audio/pcmu"}}, "output": {"format": {"type": "audio/pcmu"}}},
                }
            )
            _, upd = await sess.wait("session.updated", a.step_timeout, since)
            audio_cfg = (upd.get("session") or {}).get("audio") or {}
            formats = {d: ((audio_cfg.get(d) or {}).get("format") or {}) for d in ("input", "output")}
            result["session_updated_formats"] = formats
            for d, f in formats.items():
                if f.get("type") != "audio/pcmu":
                    result["failures"].append(f"session.updated audio.{d}.format is {f}, expected type audio/pcmu")
            await self.spoken_turn(conn, sess, self.ulaw8, result)
            self.common_checks(sess, result)
        finally:
            await self.close(mgr, sess)

    async def check_transcription(self, result: dict) -> None:
        a = self.args
        # The client's connect() has no `intent` parameter; its docstring says "Transcription sessions use
        # `intent=transcription`", which goes in the query string through extra_query. No model.
        mgr, conn, sess = await self.open(result, extra_query={"intent": "transcription"})
        try:
            stype = (result["session_created"] or {}).get("type")
            if stype != "transcription":
                result["failures"].append(f"session.created session.type is {stype!r}, expected 'transcription'")
            clip = self.pcm24
            since = len(sess.events)
            sender = asyncio.create_task(self.send_clip(conn, clip, result))
            try:
                await sess.wait("input_audio_buffer.speech_started", clip.duration_ms / 1000 + a.step_timeout, since)
                t_stopped, stopped = await sess.wait("input_audio_buffer.speech_stopped", clip.duration_ms / 1000 + a.step_timeout, since)
                item_id = stopped.get("item_id")
                await sess.wait("input_audio_buffer.committed", a.step_timeout, since)
                t_delta, _ = await sess.wait(
                    "conversation.item.input_audio_transcription.delta", a.step_timeout, since, lambda e: e.get("item_id") == item_id
                )
                t_completed, completed = await sess.wait(
                    "conversation.item.input_audio_transcription.completed", a.reply_timeout, since, lambda e: e.get("item_id") == item_id
                )
                _, t_speech_end = await asyncio.wait_for(sender, a.step_timeout)
            finally:
                if not sender.done():
                    sender.cancel()
            # Give a wrongly made response time to show up before looking for one.
            await asyncio.sleep(a.quiet_wait)
            deltas = "".join(
                e.get("delta") or ""
                for _, e in sess.all("conversation.item.input_audio_transcription.delta", since)
                if e.get("item_id") == item_id
            )
            result.update(
                {
                    "events": sess.sequence(since),
                    "transcript": completed.get("transcript"),
                    "transcript_deltas": deltas,
                    "latency_ms": self.ms(t_speech_end, t_delta),
                    "stopped_to_delta_ms": self.ms(t_stopped, t_delta),
                    "stopped_to_completed_ms": self.ms(t_stopped, t_completed),
                }
            )
            if not (completed.get("transcript") or "").strip():
                result["failures"].append("input_audio_transcription.completed has an empty transcript")
            responses = sorted({t for t in sess.types() if t and t.startswith("response.")})
            if responses:
                result["failures"].append(f"a transcription session made responses: {responses}")
            self.common_checks(sess, result)
        finally:
            await self.close(mgr, sess)


async def run_checks(args) -> dict:
    import openai
    import websockets

    t_start = time.monotonic()
    out: dict = {
        "ok": False,
        "base_url": args.base_url,
        "model": args.model,
        "openai_version": openai.__version__,
        "websockets_version": websockets.__version__,
        "python": sys.version.split()[0],
        "checks": {},
    }
    r = Run(args)
    wav, rate = read_wav_mono16(SPEECH_WAV)
    if rate != 48000:
        raise SystemExit(f"{SPEECH_WAV}: expected 48 kHz, got {rate}")
    t = time.monotonic()
    r.pcm24 = Clip(decimate(wav, 2, 47), 24000, "audio/pcm", args.chunk_ms, args.extra_silence_ms)
    r.ulaw8 = Clip(decimate(wav, 6, 121), 8000, "audio/pcmu", args.chunk_ms, args.extra_silence_ms)
    out["prepare_ms"] = round((time.monotonic() - t) * 1000)

    deadline = t_start + args.deadline
    for name in args.checks:
        res: dict = {"ok": False, "failures": []}
        out["checks"][name] = res
        budget = deadline - time.monotonic()
        if budget < 3:
            res["failures"].append(f"not run: the {args.deadline:.0f} s deadline is near")
            continue
        t = time.monotonic()
        try:
            await asyncio.wait_for(getattr(r, "check_" + name)(res), budget)
        except CheckFailed as e:
            res["failures"].append(str(e))
        except asyncio.TimeoutError:
            res["failures"].append(f"deadline: not finished within the {budget:.1f} s left")
        except Exception as e:  # noqa: BLE001 - a client or connection error is a result too
            res["failures"].append(f"{type(e).__name__}: {e}")
            res["traceback"] = traceback.format_exc()[-2000:]
        res["elapsed_ms"] = round((time.monotonic() - t) * 1000)
        res["ok"] = not res["failures"]
    # Schema errors are their own result, so that one odd field does not hide the behaviour checks.
    schema = sorted({e for c in out["checks"].values() for e in c.get("schema_errors", [])})
    out["schema_errors"] = schema
    out["ok"] = all(c["ok"] for c in out["checks"].values()) and not schema
    out["elapsed_ms"] = round((time.monotonic() - t_start) * 1000)
    await r.client.close()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--api-key", default="sk-test")
    p.add_argument("--model", default="echo")
    p.add_argument("--checks", default=",".join(CHECKS), help="comma-separated, of: " + ", ".join(CHECKS))
    p.add_argument("--chunk-ms", type=int, default=20, help="audio per input_audio_buffer.append")
    p.add_argument("--extra-silence-ms", type=int, default=1000, help="silence appended after the fixture")
    p.add_argument("--step-timeout", type=float, default=8.0, help="seconds to wait for each expected event")
    p.add_argument("--reply-timeout", type=float, default=15.0, help="seconds to wait for a reply to finish")
    p.add_argument("--quiet-wait", type=float, default=1.0, help="seconds a transcription session must stay quiet")
    p.add_argument("--deadline", type=float, default=60.0, help="seconds for the whole run")
    args = p.parse_args()
    args.checks = list(dict.fromkeys(c.strip() for c in args.checks.split(",") if c.strip()))
    bad = [c for c in args.checks if c not in CHECKS]
    if bad:
        p.error(f"unknown checks {bad}")
    out = asyncio.run(run_checks(args))
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
