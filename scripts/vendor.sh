#!/usr/bin/env bash
# Maintainer tool for the vendored webrtc-rs crates (vendor/*/PATCHED.md). Not used by the
# build or by CI: it may need the network.
#
#   scripts/vendor.sh verify [crate...]        does vendor/<crate> equal the crates.io release
#                                              + patches/*.patch - the documented drops?
#                                              (default: every vendor/*/PATCHED.md; exit 1 and
#                                              the diff if not)
#   scripts/vendor.sh refresh <crate> [version]
#                                              rewrite vendor/<crate> from that, keeping
#                                              PATCHED.md, UPSTREAM.md and patches/; with a new
#                                              version, also its record in PATCHED.md
#
# The record is the ```vendor block in vendor/<crate>/PATCHED.md: `version`, `sha256` (of the
# .crate, as in the crates.io index) and one `drop <path>` line per path removed from the crate.
# The .crate comes from cargo's cache ($CARGO_HOME/registry/cache; cargo never fetches a crate
# that [patch.crates-io] replaces, so it is there only if another project used it) or from this
# script's own cache (~/.cache/voice-edge/vendor), else it is downloaded from static.crates.io
# into the latter, so later runs work offline. Needs bash, tar, patch, diff, sha256sum, awk, and
# curl to download.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
own_cache=${XDG_CACHE_HOME:-$HOME/.cache}/voice-edge/vendor
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

die() { echo "vendor.sh: $*" >&2; exit 2; }

# record <crate> <key>: the values of <key> in the crate's ```vendor block, one per line.
record() {
  [[ -f $root/vendor/$1/PATCHED.md ]] || die "no vendor/$1/PATCHED.md"
  awk -v k="$2" '/^```vendor/ {f = 1; next} /^```/ {f = 0} f && $1 == k {print $2}' \
    "$root/vendor/$1/PATCHED.md"
}

# fetch <crate> <version> <sha256, or empty to accept any>: sets $crate_file, $crate_source and
# $crate_sha256.
fetch() {
  local name=$1 ver=$2 want=$3 url got
  url=https://static.crates.io/crates/$name/$name-$ver.crate
  crate_file=$(ls "$cargo_home"/registry/cache/*/"$name-$ver.crate" "$own_cache/$name-$ver.crate" \
    2>/dev/null | head -n 1 || true)
  if [[ -n $crate_file ]]; then
    crate_source=$crate_file
  else
    command -v curl >/dev/null || die "no cached $name-$ver.crate and no curl to download it"
    mkdir -p "$own_cache"
    if ! curl -fsSL --retry 2 -o "$tmp/$name-$ver.crate" "$url" 2>"$tmp/curl.err"; then
      die "$name-$ver.crate is neither in cargo's cache ($cargo_home/registry/cache/*/) nor in" \
        "$own_cache, and $url cannot be downloaded ($(tail -n 1 "$tmp/curl.err")). Run" \
        "again with network, or put the .crate in $own_cache."
    fi
    crate_file=$tmp/$name-$ver.crate
    crate_source=$url
  fi
  got=$(sha256sum "$crate_file" | cut -d ' ' -f 1)
  if [[ -n $want && $got != "$want" ]]; then
    die "$crate_source: sha256 $got, but vendor/$name/PATCHED.md records $want"
  fi
  crate_sha256=$got
  if [[ $crate_source == "$url" ]]; then
    mv "$crate_file" "$own_cache/" && crate_file=$own_cache/$name-$ver.crate
  fi
}

# build <crate> <version> <sha256>: $tmp/expected/<crate> = pristine + patches - drops.
build() {
  local crate=$1 ver=$2 out=$tmp/expected/$1 p d n=0
  fetch "$crate" "$ver" "$3"
  mkdir -p "$tmp/unpack" "$tmp/expected"
  tar -xzf "$crate_file" -C "$tmp/unpack"
  mv "$tmp/unpack/$crate-$ver" "$out"
  for p in "$root/vendor/$crate/patches/"*.patch; do
    [[ -e $p ]] || continue
    patch -d "$out" -p1 --batch --forward --fuzz=0 --no-backup-if-mismatch --quiet <"$p" ||
      die "vendor/$crate/patches/${p##*/} does not apply to $crate $ver; fix it and re-run"
    n=$((n + 1))
  done
  while read -r d; do
    [[ -n $d ]] || continue
    [[ $d != /* && $d != *..* ]] || die "vendor/$crate/PATCHED.md: bad drop path '$d'"
    [[ -e $out/$d ]] || die "vendor/$crate/PATCHED.md drops '$d', which $crate $ver does not have"
    rm -rf "${out:?}/$d"
  done < <(record "$crate" drop)
  built="$crate $ver from $crate_source + $n patches - $(record "$crate" drop | grep -c .) drops"
}

verify() {
  local crate=$1 ver sha
  ver=$(record "$crate" version)
  sha=$(record "$crate" sha256)
  [[ -n $ver && -n $sha ]] || die "vendor/$crate/PATCHED.md: the vendor block needs version and sha256"
  build "$crate" "$ver" "$sha"
  # The vendored tree minus what is ours rather than the crate's.
  mkdir -p "$tmp/vendor"
  cp -a "$root/vendor/$crate" "$tmp/vendor/$crate"
  rm -rf "$tmp/vendor/$crate/PATCHED.md" "$tmp/vendor/$crate/UPSTREAM.md" "$tmp/vendor/$crate/patches"
  if (cd "$tmp" && diff -ru "expected/$crate" "vendor/$crate") >"$tmp/$crate.diff"; then
    echo "vendor/$crate: OK, equals $built"
  else
    cat "$tmp/$crate.diff"
    echo "vendor/$crate: DIFFERS from $built (diff above: expected/ is pristine + patches - drops)"
    return 1
  fi
}

refresh() {
  local crate=$1 old ver sha=
  old=$(record "$crate" version)
  ver=${2:-$old}
  [[ $ver != "$old" ]] || sha=$(record "$crate" sha256)
  build "$crate" "$ver" "$sha"
  find "$root/vendor/$crate" -mindepth 1 -maxdepth 1 \
    ! -name PATCHED.md ! -name UPSTREAM.md ! -name patches -exec rm -rf {} +
  cp -a "$tmp/expected/$crate/." "$root/vendor/$crate/"
  echo "vendor/$crate: rewritten as $built"
  if [[ $ver != "$old" ]]; then
    sed -i -e '/^```vendor/,/^```$/ s/^\(version[[:space:]]*\).*/\1'"$ver"'/' \
      -e '/^```vendor/,/^```$/ s/^\(sha256[[:space:]]*\).*/\1'"$crate_sha256"'/' \
      "$root/vendor/$crate/PATCHED.md"
    echo "vendor/$crate/PATCHED.md: record now says $ver, sha256 $crate_sha256. Check that sum" \
      "against the crates.io index, update the prose (and the upstream commit), and re-test."
  fi
  (cd "$root" && git status --short -- "vendor/$crate")
}

case ${1:-} in
  verify)
    shift
    if [[ $# -eq 0 ]]; then
      for f in "$root"/vendor/*/PATCHED.md; do d=${f%/PATCHED.md}; set -- "$@" "${d##*/}"; done
    fi
    status=0
    for crate in "$@"; do verify "$crate" || status=1; done
    exit $status
    ;;
  refresh)
    [[ $# -ge 2 && $# -le 3 ]] || die "usage: scripts/vendor.sh refresh <crate> [version]"
    refresh "$2" "${3:-}"
    ;;
  *)
    echo "usage: scripts/vendor.sh verify [crate...] | refresh <crate> [version]" >&2
    exit 2
    ;;
esac
