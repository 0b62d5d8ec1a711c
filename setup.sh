#!/usr/bin/env bash
# setup.sh — installs the Debian packages kbsim needs (when missing) and builds it into build/
# Usage: ./setup.sh [extra cmake arguments]   (run as root, or with sudo available)
#        KBSIM_PEERS=1 ./setup.sh   also installs the peer simulators of bench/ (SystemC,
#        SimGrid: their benchmarks and tests are built when they are found)
set -euo pipefail
cd "$(dirname "$0")"

# graphviz: dot draws kbsim --describe-dot (cli.describe renders it when dot is there);
# strace: cli.mpi_pmix_nodelay checks the socket options kbsim sets under mpirun
packages=(gcc cmake make pkg-config liblua5.4-dev libuv1-dev libyaml-dev gnuplot-nox valgrind python3
  python3-numpy libopenmpi-dev openmpi-bin graphviz strace)
# optional: the peers of bench/README.md (libsimgrid-dev pulls the Boost headers)
[ "${KBSIM_PEERS:-}" = 1 ] && packages+=(g++ libsystemc-dev libsimgrid-dev time)
# python3-torch (large) only when asked or in CI: the torch.distributed backend's
# tests (cli.cosim_torch_*) need it and skip without it
if [ "${KBSIM_TORCH:-}" = "1" ] || [ "${CI:-}" = "true" ]; then packages+=(python3-torch); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

args=()
[ "${CI:-}" = "true" ] && args+=(-DKBSIM_WERROR=ON)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${args[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
