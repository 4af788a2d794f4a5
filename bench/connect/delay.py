#!/usr/bin/env python3
"""A user-space network delay stage for loopback benchmarks (stdlib only, asyncio).

UDP: every datagram a client sends to a --udp LISTEN port is forwarded to TARGET after RTT/2 (+ jitter),
from an upstream socket of that client's own (so the target sees one distinct 5-tuple per client); every
reply the target sends to that upstream socket goes back to the client from LISTEN after RTT/2 (+ jitter).
TCP (--tcp, optional, for the signaling HTTP port): each accepted connection is proxied to TARGET, every
chunk in either direction delivered RTT/2 after it was read, in order; a new connection's first bytes wait
one RTT more (the SYN/SYN-ACK a real network would cost before the client could send them).

    python3 delay.py --rtt-ms 50 --udp 127.0.0.1:40001=127.0.0.1:40000 [--tcp 127.0.0.1:8081=127.0.0.1:8080]
                     [--udp 127.0.0.1:40003=dynamic --control 127.0.0.1:40004] [--jitter-ms 0] [--max-seconds 600]
                     [--trace /tmp/delay.txt]

TARGET `dynamic`: the target of a *new* client is whatever was last set over the control socket (a UDP
datagram `target HOST:PORT`, answered `ok`); a client keeps the target it started with. For answerers that
open a new port per call (aiortc): the driver reads the port from the answer, sets it, then points the
browser at LISTEN.

Jitter (--jitter-ms J) adds a uniform 0..J ms to each datagram's delay, so it may reorder them; 0 (the
default) keeps the order. Bounded: exits by itself after --max-seconds, when its parent process goes away,
or on SIGTERM/SIGINT. A client's upstream socket is closed after --idle-seconds without traffic.
Prints one line `delay ready ...` to stdout once every socket is bound, and a counter line on exit.
--trace FILE writes every datagram's arrival (ms, stage, client port, c>t or t>c, size, STUN/DTLS message as
pcap_dtls.py names it), before its delay: the timeline of a handshake without tcpdump.
"""
import argparse
import asyncio
import os
import random
import signal
import sys
import time


def hostport(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    return host or "127.0.0.1", int(port)


TRACE = {"file": None, "t0": None, "left": 20000}


def trace(stage: str, direction: str, client_port: int, data: bytes) -> None:
    """With --trace: one line per datagram as it reaches the stage (before its delay), STUN/DTLS decoded."""
    f = TRACE["file"]
    if f is None or TRACE["left"] <= 0:
        return
    now = time.monotonic()
    if TRACE["t0"] is None:
        TRACE["t0"] = now
    TRACE["left"] -= 1
    try:
        from pcap_dtls import classify  # same folder
        what = classify(data)
    except Exception:  # noqa: BLE001 - a trace must never stop the stage
        what = f"?{data[:1].hex()}"
    f.write(f"{(now - TRACE['t0']) * 1000:10.1f} ms  {stage}  client:{client_port} {direction} {len(data):5d}  {what}\n")


class Stats:
    def __init__(self) -> None:
        self.up = 0  # client → target datagrams
        self.down = 0  # target → client
        self.clients = 0
        self.tcp_conns = 0
        self.tcp_bytes = 0


class UdpStage(asyncio.DatagramProtocol):
    """One LISTEN port: clients on one side, a target (fixed or dynamic) on the other."""

    def __init__(self, loop, listen, target, one_way_s, jitter_s, idle_s, stats: Stats, name: str):
        self.loop = loop
        self.listen = listen
        self.target = target  # (host, port) or None until set (dynamic)
        self.one_way_s = one_way_s
        self.jitter_s = jitter_s
        self.idle_s = idle_s
        self.stats = stats
        self.name = name
        self.transport = None  # the LISTEN socket
        self.upstreams: dict[tuple, "Upstream"] = {}

    def delay(self) -> float:
        return self.one_way_s + (random.uniform(0, self.jitter_s) if self.jitter_s > 0 else 0.0)

    # asyncio.DatagramProtocol for the LISTEN socket
    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        trace(self.name, "c>t", addr[1], data)
        up = self.upstreams.get(addr)
        if up is None:
            if self.target is None:
                print(f"[delay] {self.name}: datagram from {addr} but no target set yet; dropped",
                      file=sys.stderr)
                return
            up = Upstream(self, addr, self.target)
            self.upstreams[addr] = up
            self.stats.clients += 1
            self.loop.create_task(up.open())
        up.last = time.monotonic()
        self.loop.call_later(self.delay(), up.send, data)

    def error_received(self, exc):
        pass

    def connection_lost(self, exc):
        pass

    def reply(self, data, client):
        if self.transport is not None and not self.transport.is_closing():
            self.stats.down += 1
            self.transport.sendto(data, client)

    def sweep(self):
        now = time.monotonic()
        for addr, up in list(self.upstreams.items()):
            if now - up.last > self.idle_s:
                up.close()
                del self.upstreams[addr]


class Upstream(asyncio.DatagramProtocol):
    """The socket one client's datagrams leave from towards the target; replies go back to that client."""

    def __init__(self, stage: UdpStage, client, target):
        self.stage = stage
        self.client = client
        self.target = target
        self.transport = None
        self.pending: list[bytes] = []  # due before the socket was open
        self.last = time.monotonic()

    async def open(self):
        # On the target's own address: the target then sees (and a STUN answer maps) the client on
        # the address family and interface it serves, not loopback, which Firefox would not pair.
        await self.stage.loop.create_datagram_endpoint(lambda: self, local_addr=(self.target[0], 0))

    def connection_made(self, transport):
        self.transport = transport
        for d in self.pending:
            self._send_now(d)
        self.pending.clear()

    def send(self, data):
        if self.transport is None:
            self.pending.append(data)
        else:
            self._send_now(data)

    def _send_now(self, data):
        if not self.transport.is_closing():
            self.stage.stats.up += 1
            self.transport.sendto(data, self.target)

    def datagram_received(self, data, addr):
        trace(self.stage.name, "t>c", self.client[1], data)
        self.last = time.monotonic()
        self.stage.loop.call_later(self.stage.delay(), self.stage.reply, data, self.client)

    def error_received(self, exc):
        pass  # e.g. ICMP port unreachable once the target closed its socket

    def close(self):
        if self.transport is not None:
            self.transport.close()


async def tcp_proxy(listen, target, one_way_s, stats: Stats, conns: set):
    async def pump(reader, writer, first_extra_s):
        """Copy reader → writer, each chunk delivered one_way_s after it was read (in order)."""
        q: asyncio.Queue = asyncio.Queue()

        async def deliver():
            while True:
                due, data = await q.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if data is None:
                    try:
                        if writer.can_write_eof():
                            writer.write_eof()
                    except OSError:
                        pass
                    return
                writer.write(data)
                stats.tcp_bytes += len(data)
                try:
                    await writer.drain()
                except OSError:
                    return

        task = asyncio.create_task(deliver())
        extra = first_extra_s
        try:
            while True:
                data = await reader.read(65536)
                q.put_nowait((time.monotonic() + one_way_s + extra, data or None))
                extra = 0.0
                if not data:
                    break
        except OSError:
            q.put_nowait((time.monotonic(), None))
        await task

    async def on_client(creader, cwriter):
        conns.add(asyncio.current_task())
        try:
            await proxy(creader, cwriter)
        finally:
            conns.discard(asyncio.current_task())

    async def proxy(creader, cwriter):
        stats.tcp_conns += 1
        accepted = time.monotonic()
        try:
            treader, twriter = await asyncio.open_connection(*target)
        except OSError:
            cwriter.close()
            return
        # The client's first bytes would leave one RTT after its SYN (the SYN-ACK's round trip).
        handshake_s = 2 * one_way_s
        try:
            await asyncio.gather(pump(creader, twriter, max(0.0, accepted + handshake_s - time.monotonic())),
                                 pump(treader, cwriter, 0.0))
        except (asyncio.CancelledError, OSError):
            pass  # shutting down, or a side reset the connection
        finally:
            for w in (twriter, cwriter):
                try:
                    w.close()
                except OSError:
                    pass

    return await asyncio.start_server(on_client, *listen)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rtt-ms", type=float, required=True, help="round-trip time added (half each way)")
    ap.add_argument("--jitter-ms", type=float, default=0.0, help="uniform 0..J ms extra per datagram (reorders)")
    ap.add_argument("--udp", action="append", default=[], metavar="LISTEN=TARGET",
                    help="HOST:PORT=HOST:PORT, or HOST:PORT=dynamic (target set over --control)")
    ap.add_argument("--tcp", action="append", default=[], metavar="LISTEN=TARGET", help="HOST:PORT=HOST:PORT")
    ap.add_argument("--control", metavar="HOST:PORT", help="UDP control socket for dynamic targets")
    ap.add_argument("--max-seconds", type=float, default=600.0)
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--trace", metavar="FILE", help="write a STUN/DTLS timeline of every UDP datagram here")
    args = ap.parse_args()
    if not args.udp and not args.tcp:
        ap.error("nothing to do: give --udp and/or --tcp")
    if args.rtt_ms < 0 or args.jitter_ms < 0 or args.max_seconds <= 0:
        ap.error("--rtt-ms and --jitter-ms must be >= 0, --max-seconds > 0")

    if args.trace:
        TRACE["file"] = open(args.trace, "w", buffering=1)
    loop = asyncio.get_running_loop()
    one_way = args.rtt_ms / 2000.0
    stats = Stats()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.call_later(args.max_seconds, stop.set)
    parent = os.getppid()

    stages: list[UdpStage] = []
    dynamic: list[UdpStage] = []
    for spec in args.udp:
        listen_s, _, target_s = spec.partition("=")
        target = None if target_s == "dynamic" else hostport(target_s)
        st = UdpStage(loop, hostport(listen_s), target, one_way, args.jitter_ms / 1000.0, args.idle_seconds,
                      stats, listen_s)
        await loop.create_datagram_endpoint(lambda st=st: st, local_addr=st.listen)
        stages.append(st)
        if target is None:
            dynamic.append(st)
    if dynamic and not args.control:
        ap.error("a dynamic --udp target needs --control")

    class Control(asyncio.DatagramProtocol):
        def connection_made(self, transport):
            self.transport = transport

        def datagram_received(self, data, addr):
            words = data.decode(errors="replace").split()
            if len(words) == 2 and words[0] == "target":
                for st in dynamic:
                    st.target = hostport(words[1])
                self.transport.sendto(b"ok", addr)
            else:
                self.transport.sendto(b"error: want 'target HOST:PORT'", addr)

    if args.control:
        await loop.create_datagram_endpoint(Control, local_addr=hostport(args.control))

    conns: set = set()  # live TCP connection tasks, cancelled on exit
    servers = [await tcp_proxy(hostport(l), hostport(t), one_way, stats, conns)
               for l, _, t in (spec.partition("=") for spec in args.tcp)]

    print(f"delay ready rtt {args.rtt_ms} ms jitter {args.jitter_ms} ms udp {' '.join(args.udp) or '-'} "
          f"tcp {' '.join(args.tcp) or '-'}", flush=True)

    async def housekeeping():
        while not stop.is_set():
            await asyncio.sleep(1.0)
            for st in stages:
                st.sweep()
            if os.getppid() != parent:  # our parent died: do not outlive it
                print("[delay] parent gone, exiting", file=sys.stderr)
                stop.set()

    hk = asyncio.create_task(housekeeping())
    await stop.wait()
    hk.cancel()
    for s in servers:
        s.close()
    for t in list(conns):
        t.cancel()
    await asyncio.gather(*conns, return_exceptions=True)
    for st in stages:
        for up in st.upstreams.values():
            up.close()
        if st.transport:
            st.transport.close()
    print(f"delay done: {stats.clients} udp client(s), {stats.up} datagrams up, {stats.down} down; "
          f"{stats.tcp_conns} tcp connection(s), {stats.tcp_bytes} bytes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
