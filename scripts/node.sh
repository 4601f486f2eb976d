#!/usr/bin/env bash
# Installs one exact Node.js version from the npm registry package node-linux-<arch>@<version>
# (the official binary in its bin/) into a cache folder outside git, and prints the folder that
# holds its `node`, for PATH. Idempotent: a cached binary that runs and reports that version is
# reused; anything else is fetched again. Needs a working npm (any Node's) to fetch.
#
#   bash scripts/node.sh 26.10.0                              # prints e.g. ~/.cache/tracking-ci/node-v26.10.0-linux-x64/bin
#   PATH="$(bash scripts/node.sh 22.23.3):$PATH" npm test     # the suite on that Node (npm runs on it too)
#
# The package ships node alone, without npm: npm is a script started with `#!/usr/bin/env node`,
# so the npm already installed runs on whichever node comes first on PATH.
#
# Environment (optional): TRACKING_CACHE_DIR cache folder (default $HOME/.cache/tracking-ci).
set -euo pipefail

say() { echo "node.sh: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

VERSION="${1:-}"
VERSION="${VERSION#v}"
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "usage: bash scripts/node.sh <exact version, e.g. 26.10.0>"

[ "$(uname -s)" = Linux ] || fail "only Linux binaries are installed this way; put a Node $VERSION on PATH yourself"
case "$(uname -m)" in
  x86_64) ARCH=x64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) fail "no node-linux-* package for $(uname -m); put a Node $VERSION on PATH yourself" ;;
esac
PACKAGE="node-linux-$ARCH@$VERSION"

CACHE_DIR="${TRACKING_CACHE_DIR:-$HOME/.cache/tracking-ci}"
DIR="$CACHE_DIR/node-v$VERSION-linux-$ARCH"

runs() { [ -x "$1/bin/node" ] && [ "$("$1/bin/node" -p process.version 2>/dev/null)" = "v$VERSION" ]; }

mkdir -p "$CACHE_DIR"
if runs "$DIR"; then
  echo "$DIR/bin"
  exit 0
fi

# One installer per version at a time; a second caller waits, then finds it installed.
exec 9>"$DIR.lock"
flock -w 600 9 || fail "timed out waiting for another node.sh run installing $VERSION"
if runs "$DIR"; then
  echo "$DIR/bin"
  exit 0
fi

command -v npm >/dev/null || fail "npm is needed to fetch $PACKAGE from the npm registry"
tmp="$(mktemp -d "$CACHE_DIR/node-$VERSION.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "fetching $PACKAGE from the npm registry"
# npm pack checks the tarball against the registry's integrity digest.
tgz="$(cd "$tmp" && npm pack "$PACKAGE" --loglevel=error | tail -n 1)" || fail "npm pack $PACKAGE failed"
[ -f "$tmp/$tgz" ] || fail "npm pack $PACKAGE gave no tarball"
# Only the binary and its licence: the headers (2,800 files) are for native add-ons, which need none here.
mkdir -p "$tmp/out"
tar -xzf "$tmp/$tgz" -C "$tmp/out" --strip-components=1 package/bin/node package/LICENSE ||
  fail "unpacking $tgz failed"
runs "$tmp/out" || fail "the unpacked binary does not run as v$VERSION: $("$tmp/out/bin/node" --version 2>&1 || true)"
rm -rf "$DIR"
mv "$tmp/out" "$DIR"
say "installed Node $VERSION in $DIR"
echo "$DIR/bin"
