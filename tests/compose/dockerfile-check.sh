#!/usr/bin/env bash
# Checks the Dockerfile's build without compiling the crate a second time (tests/compose/run.sh runs it):
#   1. the `deps` stage builds: Cargo.lock, the build config and vendor/ compile in rust:1-bookworm. Docker's
#      layer cache makes this a no-op until one of them changes, when it is the one long step;
#   2. the `build` stage's COPY lines bring every file the compiler read for the host's binary (its cargo
#      dep-info, next to it), and .dockerignore drops none of them: a new include_str!/rust-embed path
#      outside them would build here and fail in the image.
#
#   bash tests/compose/dockerfile-check.sh BIN     # BIN: the binary cargo built, in its target directory
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BIN="$1"
# rustc's dep-info (deps/voice_edge-HASH.d) for the crate's lib (no executable of that name beside
# it) and its bin (an executable whose sources start at src/main.rs). The lib's unit-test harness
# is left out: it also reads test fixtures that the image never needs.
shopt -s nullglob
existing=()
for d in "$(dirname "$BIN")"/deps/voice_edge-*.d; do
  exe="${d%.d}"
  if [ ! -x "$exe" ] || grep -q '^[^:]*src/main\.rs:' "$d"; then existing+=("$d"); fi
done
[ "${#existing[@]}" -gt 0 ] || { echo "no dep-info for $BIN in its deps/" >&2; exit 1; }

t0=$SECONDS
docker build -q --target deps -t voice-edge:deps . >/tmp/dockerfile-deps.log 2>&1 \
  || { tail -40 /tmp/dockerfile-deps.log >&2; echo "the Dockerfile's deps stage failed" >&2; exit 1; }
echo "[dockerfile] deps stage: $((SECONDS - t0)) s (cached unless Cargo.lock, .cargo or vendor/ changed)" >&2

# What the stages copy (COPY <src>... <dest>, build context paths), and what .dockerignore drops.
mapfile -t copied < <(awk '$1 == "COPY" && $2 !~ /^--/ { for (i = 2; i < NF; i++) print $i }' Dockerfile)
python3 - "$PWD" "${#existing[@]}" "${existing[@]}" "${copied[@]}" <<'PY'
import fnmatch, os, sys
root, n = sys.argv[1], int(sys.argv[2])
depinfos, copied = sys.argv[3:3 + n], sys.argv[3 + n:]
text = "\n".join(open(d).read().replace("\\\n", " ") for d in depinfos)
deps = set()
for line in text.splitlines():
    if line.startswith("#"):
        continue
    if ":" not in line:
        continue
    for p in line.split(":", 1)[1].split():
        p = os.path.relpath(p, root)
        if not p.startswith("..") and not p.startswith("target/"):
            deps.add(p)
ignore = [l.strip() for l in open(os.path.join(root, ".dockerignore")) if l.strip() and not l.startswith("#")]
def covered(p):
    return any(p == c.rstrip("/") or p.startswith(c.rstrip("/") + "/") for c in copied)
def ignored(p):
    return any(fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(os.path.basename(p), pat)
               or p.startswith(pat.rstrip("/") + "/") for pat in ignore if not pat.startswith("!"))
missing = sorted(p for p in deps if not covered(p))
dropped = sorted(p for p in deps if covered(p) and ignored(p))
for p in missing:
    print(f"[dockerfile] the compiler read {p}, which no COPY in the Dockerfile brings", file=sys.stderr)
for p in dropped:
    print(f"[dockerfile] the compiler read {p}, which .dockerignore drops", file=sys.stderr)
print(f"[dockerfile] build stage: its COPY lines ({' '.join(copied)}) cover the {len(deps)} files the compiler read",
      file=sys.stderr)
sys.exit(1 if missing or dropped else 0)
PY
