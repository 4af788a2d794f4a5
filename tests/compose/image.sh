#!/usr/bin/env bash
# Tags voice-edge:local from a built static binary: the Dockerfile's runtime stage (FROM scratch)
# around it, so that neither CI (tests/compose/run.sh) nor a bench (bench/compose/load.sh) compiles
# the crate a second time inside Docker. The Dockerfile's own build stages are checked apart, by
# tests/compose/dockerfile-check.sh.
#
#   bash tests/compose/image.sh BIN
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BIN="${1:?usage: $0 path/to/static/voice-edge}"
if ldd "$BIN" 2>&1 | grep -q '=>'; then
  ldd "$BIN" >&2
  echo "image.sh: $BIN is linked dynamically (see .cargo/config.toml)" >&2
  exit 1
fi
ctx=$(mktemp -d /tmp/ve-image.XXXX)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp"
chmod 1777 "$ctx/rootfs/tmp"
cp "$BIN" "$ctx/rootfs/usr/local/bin/voice-edge"
cp /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
sed -n '/^FROM scratch/,$p' Dockerfile | sed 's#^COPY --from=build /rootfs/ /$#COPY rootfs/ /#' >"$ctx/Dockerfile"
if ! grep -q '^COPY rootfs/ /$' "$ctx/Dockerfile"; then
  echo "image.sh: the Dockerfile's runtime stage (FROM scratch) no longer copies /rootfs/ from the build stage" >&2
  exit 1
fi
docker build -q -t voice-edge:local "$ctx"
