#!/usr/bin/env bash
# Prints the path of a `promtool` binary (Prometheus's rule and config checker), for the test that
# checks docs/prometheus-rules.yml. One on PATH is used as it is; otherwise Debian's `prometheus`
# package is fetched once with `apt-get download` (no root needed) and unpacked with `dpkg-deb -x`
# into a cache folder outside git, the way scripts/node.sh caches Node. Idempotent: a cached
# promtool that runs is reused; anything else is fetched again.
#
#   "$(bash scripts/promtool.sh)" check rules docs/prometheus-rules.yml
#
# Environment (optional): TRACKING_CACHE_DIR cache folder (default $HOME/.cache/tracking-ci).
set -euo pipefail

say() { echo "promtool.sh: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

runs() { [ -x "$1" ] && "$1" --version >/dev/null 2>&1; }

if command -v promtool >/dev/null && runs "$(command -v promtool)"; then
  command -v promtool
  exit 0
fi

CACHE_DIR="${TRACKING_CACHE_DIR:-$HOME/.cache/tracking-ci}"
DIR="$CACHE_DIR/prometheus"
BIN="$DIR/usr/bin/promtool"

mkdir -p "$CACHE_DIR"
if runs "$BIN"; then
  echo "$BIN"
  exit 0
fi

# One installer at a time; a second caller waits, then finds it installed.
exec 9>"$DIR.lock"
flock -w 600 9 || fail "timed out waiting for another promtool.sh run"
if runs "$BIN"; then
  echo "$BIN"
  exit 0
fi

command -v apt-get >/dev/null || fail "apt-get is needed to fetch Debian's prometheus package; put a promtool on PATH yourself"
command -v dpkg-deb >/dev/null || fail "dpkg-deb is needed to unpack Debian's prometheus package"
tmp="$(mktemp -d "$CACHE_DIR/prometheus.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "fetching Debian's prometheus package"
# apt-get download checks the package against the signed archive index; it needs no root. With no
# package lists yet (a fresh container), run `apt-get update` as root first.
(cd "$tmp" && apt-get download -q prometheus >&2) || fail "apt-get download prometheus failed (no package lists? run apt-get update)"
deb="$(ls "$tmp"/prometheus_*.deb 2>/dev/null | head -n 1)"
[ -n "$deb" ] || fail "apt-get download gave no prometheus_*.deb"
mkdir -p "$tmp/out"
dpkg-deb -x "$deb" "$tmp/out" || fail "unpacking $deb failed"
runs "$tmp/out/usr/bin/promtool" || fail "the unpacked promtool does not run"
rm -rf "$DIR"
mv "$tmp/out" "$DIR"
say "installed promtool in $DIR"
echo "$BIN"
