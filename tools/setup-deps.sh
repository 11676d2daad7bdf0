#!/bin/sh
# Install the Debian packages tcomp needs, or say exactly how to.
# Used by `make setup` (and so by `make demo` and `make test`).
set -e
PKGS="build-essential cmake pkg-config python3 clang libclang-rt-14-dev libisl-dev llvm-19-dev libsqlite3-dev libdlpack-dev libcmocka-dev zlib1g-dev dataset-fashion-mnist"
missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "tcomp setup: installing$missing"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
else
  echo "tcomp setup: missing Debian packages:$missing" >&2
  echo "run:  sudo apt-get install -y$missing" >&2
  exit 1
fi
