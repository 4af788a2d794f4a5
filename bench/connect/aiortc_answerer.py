#!/usr/bin/env python3
"""A minimal aiortc answerer that speaks the same signaling as voice-edge, as a connect-time baseline.

POST /v1/realtime/calls with an SDP offer body → 201 + application/sdp answer (+ Location). The answerer
echoes the offered audio track back and accepts the data channel the client creates ('oai-events').
CORS headers let a page on another origin call it. Media is loopback only: the ICE host candidate is
127.0.0.1 (aioice normally skips loopback and lists every other interface) and there are no STUN/TURN
servers (aiortc would otherwise ask stun.l.google.com).

    python aiortc_answerer.py --port 8090 [--max-call-secs 30] [--ice-lite]

--ice-lite adds a=ice-lite to the answer (aiortc still runs full ICE), as voice-edge's answers do: a control
showing what that one line does to Chromium's nomination and so to the connect time.

Every call is closed when the client goes away or after --max-call-secs, whichever comes first. Each answer's
a=setup line (the DTLS role aiortc took) is logged to stderr and returned in the x-dtls-setup header.
"""
import argparse
import asyncio
import itertools
import logging
import re
import signal
import sys
import time

import aioice.ice
from aiohttp import web
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaRelay

# Host candidates: loopback only, so the ICE path matches voice-edge's (which answers with 127.0.0.1).
aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"] if use_ipv4 else []

log = logging.getLogger("aiortc-answerer")
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "POST, DELETE, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization",
    "Access-Control-Expose-Headers": "Location, x-dtls-setup",
    "Access-Control-Max-Age": "600",
}

calls: dict[str, RTCPeerConnection] = {}
ids = itertools.count(1)
relay = MediaRelay()


async def close_call(call_id: str) -> None:
    pc = calls.pop(call_id, None)
    if pc is not None:
        await pc.close()


async def options(_request: web.Request) -> web.Response:
    return web.Response(status=204, headers=CORS)


async def create_call(request: web.Request) -> web.Response:
    offer_sdp = await request.text()
    if "v=0" not in offer_sdp:
        return web.Response(status=400, text="expected an SDP offer body", headers=CORS)
    t0 = time.perf_counter()
    call_id = f"rtc_aiortc_{next(ids)}"
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    calls[call_id] = pc
    max_secs = request.app["max_call_secs"]

    @pc.on("track")
    def on_track(track):
        if track.kind == "audio":
            pc.addTrack(relay.subscribe(track))  # echo the mic back

    @pc.on("datachannel")
    def on_datachannel(channel):
        @channel.on("message")
        def on_message(message):
            pass  # accepted, not answered

    @pc.on("connectionstatechange")
    async def on_state():
        log.info("%s connectionState=%s", call_id, pc.connectionState)
        if pc.connectionState in ("failed", "closed"):
            await close_call(call_id)

    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
    answer = await pc.createAnswer()
    await pc.setLocalDescription(answer)  # aiortc gathers all candidates here (no trickle)
    sdp = pc.localDescription.sdp
    if request.app["ice_lite"]:
        sdp = sdp.replace("\r\nm=", "\r\na=ice-lite\r\nm=", 1)  # session level, before the first m=
    setup = ",".join(sorted(set(re.findall(r"a=setup:(\w+)", sdp)))) or "?"
    log.info("%s answered in %.1f ms, a=setup:%s", call_id, (time.perf_counter() - t0) * 1000, setup)
    # Bounded lifetime whatever the client does.
    asyncio.get_running_loop().call_later(max_secs, lambda: asyncio.ensure_future(close_call(call_id)))
    return web.Response(
        status=201,
        body=sdp.encode(),
        headers={**CORS, "Content-Type": "application/sdp", "Location": f"/v1/realtime/calls/{call_id}",
                 "x-dtls-setup": setup},
    )


async def delete_call(request: web.Request) -> web.Response:
    await close_call(request.match_info["call_id"])
    return web.Response(status=204, headers=CORS)


async def health(_request: web.Request) -> web.Response:
    return web.Response(text=f"aiortc answerer, {len(calls)} live call(s)\n", headers=CORS)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8090)
    ap.add_argument("--max-call-secs", type=float, default=30.0)
    ap.add_argument("--ice-lite", action="store_true", help="declare a=ice-lite in answers (a control)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[aiortc] %(message)s")
    logging.getLogger("aiortc").setLevel(logging.WARNING)
    logging.getLogger("aioice").setLevel(logging.WARNING)

    app = web.Application()
    app["max_call_secs"] = args.max_call_secs
    app["ice_lite"] = args.ice_lite
    app.router.add_get("/", health)
    app.router.add_route("OPTIONS", "/{tail:.*}", options)
    app.router.add_post("/v1/realtime/calls", create_call)
    app.router.add_delete("/v1/realtime/calls/{call_id}", delete_call)
    app.router.add_post("/v1/realtime/calls/{call_id}/hangup", delete_call)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port).start()
    log.info("listening on http://%s:%d/", args.host, args.port)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await asyncio.gather(*(close_call(c) for c in list(calls)), return_exceptions=True)
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
