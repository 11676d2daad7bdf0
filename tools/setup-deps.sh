#!/bin/sh
# Install the Debian packages tcomp needs, or say exactly how to.
# Used by `make setup` (and so by `make demo` and `make test`).
set -e
PKGS="build-essential cmake pkg-config python3 clang libclang-rt-14-dev libisl-dev llvm-19-dev libsqlite3-dev libdlpack-dev libcmocka-dev zlib1g-dev dataset-fashion-mnist"
# Installed without their recommended packages (python3-torch recommends a
# few hundred MB more): the Python package's tests (tests/python): NumPy,
# pytest, PyTorch, and pip with setuptools for `pip install tools/python`;
# Open MPI for distributed tuning (`mpirun -n N tcomp autotune`) and its
# tests.
PYPKGS="python3-numpy python3-pytest python3-torch python3-pip python3-setuptools python3-wheel libopenmpi-dev openmpi-bin"

# The packages of the list $1 that are not installed, each after a blank.
not_installed() {
  for p in $1; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      printf ' %s' "$p"
    fi
  done
}
missing=$(not_installed "$PKGS")
pymissing=$(not_installed "$PYPKGS")
[ -z "$missing$pymissing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "tcomp setup: installing$missing$pymissing"
  apt-get update -qq
  [ -z "$missing" ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
  [ -z "$pymissing" ] ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pymissing
else
  echo "tcomp setup: missing Debian packages:$missing$pymissing" >&2
  [ -z "$missing" ] || echo "run:  sudo apt-get install -y$missing" >&2
  [ -z "$pymissing" ] ||
    echo "run:  sudo apt-get install -y --no-install-recommends$pymissing" >&2
  exit 1
fi
