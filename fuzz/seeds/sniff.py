"""Writes every UDP datagram on the loopback interface as JSON lines {src, dst, hex} until killed.

Loopback carries everything in the capture: the browsers reach the relay at this host's own address,
and relay and transceivers talk over 127.0.0.1 (--udp-links). Needs root (AF_PACKET).
"""

import json
import socket
import struct
import sys

ETH_P_ALL = 0x0003

sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
sock.bind(("lo", 0))
with open(sys.argv[1], "w") as out:
    while True:
        frame, addr = sock.recvfrom(70000)
        if addr[2] == socket.PACKET_OUTGOING:  # loopback shows each frame twice
            continue
        ip = frame[14:]
        if ip[0] >> 4 == 4 and ip[9] == 17:
            family, src, dst, udp = socket.AF_INET, ip[12:16], ip[16:20], ip[(ip[0] & 15) * 4 :]
        elif ip[0] >> 4 == 6 and ip[6] == 17:
            family, src, dst, udp = socket.AF_INET6, ip[8:24], ip[24:40], ip[40:]
        else:
            continue
        sport, dport, length = struct.unpack("!HHH", udp[:6])
        src, dst = socket.inet_ntop(family, src), socket.inet_ntop(family, dst)
        out.write(json.dumps({"src": f"{src}:{sport}", "dst": f"{dst}:{dport}", "hex": udp[8:length].hex()}) + "\n")
        out.flush()
