#!/usr/bin/env python3
"""Print a loopback pcap as a STUN/DTLS timeline (stdlib only): when each ClientHello, HelloVerifyRequest,
ServerHello... went which way. Use it to see who waited on whom during a connect.

    tcpdump -i lo -n -U -w /tmp/c.pcap udp &   # while running connect.mjs against one target
    python3 bench/connect/pcap_dtls.py /tmp/c.pcap [--port UDPPORT] [--rtp]

Handshake types: 1 ClientHello, 2 ServerHello, 3 HelloVerifyRequest, 11 Certificate, 12 ServerKeyExchange,
13 CertificateRequest, 14 ServerHelloDone, 15 CertificateVerify, 16 ClientKeyExchange; HS(enc) = Finished.
Packets that are neither STUN, DTLS nor RTP (e.g. voice-edge's relay→transceiver framing) show as '?<byte>'.
"""
import argparse
import struct

HS = {1: "ClientHello", 2: "ServerHello", 3: "HelloVerifyRequest", 11: "Certificate", 12: "ServerKeyExchange",
      13: "CertificateRequest", 14: "ServerHelloDone", 15: "CertificateVerify", 16: "ClientKeyExchange"}
STUN = {0x0001: "STUN Binding request", 0x0101: "STUN Binding success", 0x0111: "STUN Binding error"}


def classify(pl: bytes) -> str:
    if not pl:
        return "empty"
    b = pl[0]
    if b in (0, 1) and len(pl) >= 20:
        t = struct.unpack(">H", pl[:2])[0]
        flags, i = [], 20
        while i + 4 <= len(pl):  # attributes worth seeing: who nominates, who claims which role
            at, ln = struct.unpack(">HH", pl[i:i + 4])
            name = {0x0025: "USE-CANDIDATE", 0x8029: "ICE-CONTROLLED", 0x802A: "ICE-CONTROLLING"}.get(at)
            if name:
                flags.append(name)
            i += 4 + ((ln + 3) & ~3)
        return STUN.get(t, f"STUN {t:#06x}") + (f" ({', '.join(flags)})" if flags else "")
    if 20 <= b <= 63:
        recs, i = [], 0
        while i + 13 <= len(pl):
            ct, ep = pl[i], struct.unpack(">H", pl[i + 3:i + 5])[0]
            ln = struct.unpack(">H", pl[i + 11:i + 13])[0]
            if ct == 22 and ep == 0 and i + 25 <= len(pl):
                mlen = int.from_bytes(pl[i + 14:i + 17], "big")
                foff = int.from_bytes(pl[i + 19:i + 22], "big")
                flen = int.from_bytes(pl[i + 22:i + 25], "big")
                frag = f"[{foff}+{flen}/{mlen}]" if flen != mlen else ""
                recs.append(HS.get(pl[i + 13], f"HS{pl[i + 13]}") + frag)
            else:
                recs.append({20: "ChangeCipherSpec", 21: "Alert", 22: "HS(enc)", 23: "AppData"}.get(ct, f"ct{ct}"))
            i += 13 + ln
        return "DTLS " + ", ".join(recs)
    if 128 <= b <= 191:
        return "RTP/RTCP"
    return f"?{b}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("pcap")
    ap.add_argument("--port", type=int, help="only packets to/from this UDP port")
    ap.add_argument("--rtp", action="store_true", help="show RTP/RTCP too")
    a = ap.parse_args()
    with open(a.pcap, "rb") as f:
        gh = f.read(24)
        link = struct.unpack("<I", gh[20:24])[0]
        t0 = None
        while True:
            h = f.read(16)
            if len(h) < 16:
                break
            ts, tu, incl, _ = struct.unpack("<IIII", h)
            d = f.read(incl)
            ip = d[{1: 14, 113: 16, 0: 4}.get(link, 14):]
            if not ip or ip[0] >> 4 != 4 or ip[9] != 17:
                continue
            ihl = (ip[0] & 15) * 4
            sp, dp = struct.unpack(">HH", ip[ihl:ihl + 4])
            if a.port and a.port not in (sp, dp):
                continue
            kind = classify(ip[ihl + 8:])
            if kind == "RTP/RTCP" and not a.rtp:
                continue
            t = ts + tu / 1e6
            t0 = t if t0 is None else t0
            print(f"{(t - t0) * 1000:9.1f} ms  {sp:>5} -> {dp:<5} {len(ip) - ihl - 8:5}  {kind}")


if __name__ == "__main__":
    main()
