#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build liger-agent, then configures and
# builds it. Sourced by run-main-job.sh and run-tests.sh; safe to run again (nothing is
# reinstalled or rebuilt when up to date).
#
# Environment:
#   LIGER_BUILD_DIR     build directory (default: build)
#   LIGER_CUDA_ARCHS    CUDA architectures (default: 80-real;90 = sm_80, sm_90 + compute_90 PTX)
#   LIGER_SKIP_APT=1    never call apt-get (fail with the list of missing packages instead)
#   LIGER_BUILD_TARGETS targets to build, space-separated (default: all; run-main-job.sh builds
#                       only liger-agent, the workflow's Verify builds what it runs)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${LIGER_BUILD_DIR:-$repo_root/build}"

debian_packages=(
  build-essential cmake ninja-build git python3 pkg-config
  libcli11-dev nlohmann-json3-dev libcurl4-openssl-dev libfmt-dev libspdlog-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libkainjow-mustache-dev gnuplot-nox
  # the wheel test (CTest python_wheel): an offline `pip wheel --no-build-isolation` into a venv
  python3-venv python3-setuptools python3-wheel python3-pip
)

# Optional: only scripts/fuzz.sh needs them (clang's libFuzzer and sanitizer runtimes).
fuzz_debian_packages=(clang-14 libclang-rt-14-dev)

log() { printf '[setup] %s\n' "$*" >&2; }

install_missing_packages() {
  local missing=()
  for package in "${debian_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "${LIGER_SKIP_APT:-0}" = 1 ] || ! command -v apt-get >/dev/null; then
    log "missing packages: ${missing[*]}"
    log "fix: sudo apt-get install ${missing[*]}"
    exit 1
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      log "missing packages: ${missing[*]}; not root and no sudo. Fix: run as root or install them."
      exit 1
    fi
  fi
  log "installing missing Debian packages: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

find_nvcc() {
  if command -v nvcc >/dev/null; then return 0; fi
  for candidate in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    if [ -x "$candidate/nvcc" ]; then export PATH="$candidate:$PATH"; return 0; fi
  done
  log "no nvcc found: the CUDA kernel library and its GPU tests will be skipped"
  log "(install the CUDA Toolkit to build them; the agent itself builds without it)"
  return 0
}

configure_and_build() {
  local cuda_args=()
  if command -v nvcc >/dev/null; then
    cuda_args+=("-DCMAKE_CUDA_COMPILER=$(command -v nvcc)" "-DCMAKE_CUDA_ARCHITECTURES=${LIGER_CUDA_ARCHS:-80-real;90}")
  else
    cuda_args+=("-DLIGER_BUILD_KERNELS=OFF")
  fi
  if [ ! -f "$build_dir/build.ninja" ]; then
    log "configuring in $build_dir"
    cmake -S "$repo_root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" >&2
  fi
  local targets=()
  read -r -a targets <<<"${LIGER_BUILD_TARGETS:-}"
  if [ ${#targets[@]} -gt 0 ]; then
    log "building ${targets[*]} in $build_dir"
    cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}" >&2
  else
    log "building everything (the CUDA kernels and every test too; the first build takes several minutes)"
    cmake --build "$build_dir" -j "$(nproc)" >&2
  fi
}

# scripts/fuzz.sh sources this file with LIGER_SETUP_PACKAGES_ONLY=fuzz: packages only, no build.
if [ "${LIGER_SETUP_PACKAGES_ONLY:-}" = fuzz ]; then
  debian_packages+=("${fuzz_debian_packages[@]}")
  install_missing_packages
  return 0 2>/dev/null || exit 0
fi

install_missing_packages
find_nvcc
configure_and_build
export LIGER_BUILD_DIR="$build_dir"
