"""Picks the seeds out of a capture (capture.sh): <out>/udp.jsonl from sniff.py, <out>/results.json
and <out>/ports.json from capture.mjs. Rewrites fuzz/corpus/{stun_peek,link_header,route_decode,
sdp_offer}/ and the agents-sdk-sent* files of client_events/; the hand-written client events stay.
"""

import glob
import json
import os
import shutil
import sys

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus")
cap = sys.argv[1]
ports = json.load(open(os.path.join(cap, "ports.json")))
relay, stun = ports["relay"], ports["stun"]
results = json.load(open(os.path.join(cap, "results.json")))
packets = [json.loads(line) for line in open(os.path.join(cap, "udp.jsonl"))]
for p in packets:
    p["b"] = bytes.fromhex(p["hex"])

GOOG_NETWORK_INFO, USE_CANDIDATE, USERNAME = 0xC057, 0x0025, 0x0006
LINK_MAGIC, LINK_HEADER_LEN = b"VE", 26


def write(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def typ(b):
    return int.from_bytes(b[:2], "big")


def attrs(b):
    out, i = [], 20
    while i + 4 <= len(b):
        t, n = typ(b[i:]), int.from_bytes(b[i + 2 : i + 4], "big")
        out.append((t, b[i + 4 : i + 4 + n]))
        i += 4 + (n + 3) // 4 * 4
    return out


def has(b, t):
    return any(a == t for a, _ in attrs(b))


def username(b):
    return next((v for a, v in attrs(b) if a == USERNAME), None)


def first(pred):
    return next(p["b"] for p in packets if pred(p))


def is_stun(b):
    return b[:1] and b[0] < 4


for t in ["stun_peek", "link_header", "route_decode", "sdp_offer"]:
    shutil.rmtree(os.path.join(CORPUS, t), ignore_errors=True)
for f in glob.glob(os.path.join(CORPUS, "client_events", "agents-sdk-sent*")):
    os.remove(f)

# stun_peek: what reached the relay's public port, and what browsers sent a STUN server.
to_relay = lambda p: p["dst"] == relay and is_stun(p["b"])
check = lambda p: to_relay(p) and typ(p["b"]) == 1
chromium = lambda p: check(p) and has(p["b"], GOOG_NETWORK_INFO)
firefox = lambda p: check(p) and not has(p["b"], GOOG_NETWORK_INFO)
write("stun_peek", "chromium-check.bin", first(lambda p: chromium(p) and not has(p["b"], USE_CANDIDATE)))
write("stun_peek", "chromium-check-use-candidate.bin", first(lambda p: chromium(p) and has(p["b"], USE_CANDIDATE)))
ff = [p["b"] for p in packets if firefox(p)]
write("stun_peek", "firefox-check-use-candidate.bin", ff[0])
write("stun_peek", "firefox-check-after-ice-restart.bin", next(b for b in ff if username(b) != username(ff[0])))
chromium_ports = {p["src"] for p in packets if chromium(p)}
names = {0x0101: "binding-success", 0x0111: "binding-error", 0x0011: "binding-indication"}
seen = set()
for p in packets:
    browser = "chromium" if p["src"] in chromium_ports else "firefox"
    if to_relay(p) and typ(p["b"]) != 1 and (browser, typ(p["b"])) not in seen:
        seen.add((browser, typ(p["b"])))
        write("stun_peek", f"{browser}-{names.get(typ(p['b']), '%04x' % typ(p['b']))}.bin", p["b"])
# The transceiver's own checks, USERNAME client:server: peekable, never a route.
write("stun_peek", "server-check-to-client.bin", first(lambda p: p["src"] == relay and is_stun(p["b"]) and typ(p["b"]) == 1))
write("stun_peek", "srflx-request-no-username.bin", first(lambda p: p["dst"] == stun))
write("stun_peek", "dtls-client-hello.bin", first(lambda p: p["dst"] == relay and 20 <= p["b"][0] <= 63))
write("stun_peek", "srtp.bin", first(lambda p: p["dst"] == relay and 128 <= p["b"][0] <= 191))

# route_decode: the server ufrags browsers echoed (minted with the fuzz key 0), a client ufrag,
# and the 12 bytes the target's minting branch reads.
ufrags = []
for p in packets:
    if check(p):
        u = username(p["b"]).split(b":")[0]
        if u not in ufrags:
            ufrags.append(u)
for i, u in enumerate(ufrags):
    write("route_decode", f"browser-echoed-ufrag-{i}.txt", u)
write("route_decode", "client-ufrag.txt", username(first(chromium)).split(b":")[1])
write("route_decode", "mint-fields-current.bin", bytes([0, 0, 7, 0, 3, 1, 1, 2, 3, 4, 5, 6]))
write("route_decode", "mint-fields-previous-max.bin", bytes([1] + [255] * 11))


# link_header: relay <-> transceiver datagrams of the same calls, one per direction and payload kind.
def kind(inner):
    if inner[0] < 4:
        return "stun%04x" % typ(inner)
    if 20 <= inner[0] <= 63:
        return {20: "dtls-ccs", 21: "dtls-alert", 22: "dtls-handshake", 23: "dtls-appdata"}.get(inner[0], "dtls")
    if 128 <= inner[0] <= 191:
        return "srtcp" if 192 <= inner[1] <= 223 else "srtp"
    return "other"


links = [p for p in packets if p["b"][:2] == LINK_MAGIC]
transceiver = links[0]["dst"]  # the first one is a client's check on its way in
seen = set()
for p in links:
    k = ("to-transceiver" if p["dst"] == transceiver else "to-relay", kind(p["b"][LINK_HEADER_LEN:]))
    if k not in seen:
        seen.add(k)
        write("link_header", "-".join(k) + ".bin", p["b"])
# No IPv6 client in the capture: the first header again, as family 6 with 2001:db8::7.
v6 = bytearray(links[0]["b"])
v6[3], v6[10:26] = 6, bytes.fromhex("20010db8000000000000000000000007")
write("link_header", "edited-ipv6-client.bin", bytes(v6))

# sdp_offer
for b in ["chromium", "firefox"]:
    write("sdp_offer", f"{b}-initial.sdp", results[b]["initial"])
    write("sdp_offer", f"{b}-gathered.sdp", results[b]["gathered"])
    write("sdp_offer", f"{b}-ice-restart.sdp", results[b]["restart"])
    # Two offers in one input: the target renegotiates the call with the second.
    write("sdp_offer", f"{b}-initial-then-ice-restart.sdp", results[b]["initial"] + results[b]["restart"])
write("sdp_offer", "agents-sdk-chromium.sdp", results["sdk"]["local"])
# Chromium names host candidates by mDNS until a page may use the microphone.
write(
    "sdp_offer",
    "edited-chromium-gathered-mdns.sdp",
    "\n".join(
        " ".join(f if i != 4 else "5f3e2a1c-7d4b-4e8f-9a2b-3c4d5e6f7a8b.local" for i, f in enumerate(l.split(" ")))
        if l.startswith("a=candidate:") and " udp " in l.lower()
        else l
        for l in results["chromium"]["gathered"].split("\n")
    ),
)
# tests/integration/signaling_http.rs: offers signaling refuses before a transceiver sees them.
write("sdp_offer", "tests-no-audio.sdp", "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=fingerprint:sha-256 00:11\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n")
write("sdp_offer", "tests-broken.sdp", "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=fingerprint:sha-256 00\r\nthis is not sdp\r\n")

# client_events: what the SDK wrote on the data channel, in order, and each session.update alone.
sent = [json.dumps(e, separators=(",", ":")) for e in results["sdk"]["sent"]]
write("client_events", "agents-sdk-sent.jsonl", "\n".join(sent) + "\n")
updates = [s for s, e in zip(sent, results["sdk"]["sent"]) if e["type"] == "session.update"]
for i, s in enumerate(updates):
    write("client_events", f"agents-sdk-sent-session-update-{i}.json", s + "\n")

for t in sorted(os.listdir(CORPUS)):
    print(t, len(os.listdir(os.path.join(CORPUS, t))))
