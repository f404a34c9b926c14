#!/usr/bin/env bash
# Installs the Debian packages kvpool needs to build and test. Idempotent and
# quiet when everything is already there.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev libabsl-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libasio-dev liburing-dev libspdlog-dev libfmt-dev libcli11-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libxxhash-dev libre2-dev libssl-dev openssl fio
  nlohmann-json3-dev etcd-server etcd-client iproute2 prometheus-cpp-dev prometheus
  python3 python3-dev pybind11-dev python3-pytest python3-numpy python3-matplotlib python3-torch
  clang-14 libfuzzer-14-dev libclang-rt-14-dev clang-format-14
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev python3-zmq python3-msgpack
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
