#!/usr/bin/env bash
# Builds and runs the host replay of the fbank frame stages (no GPU needed).
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
g++ -std=c++17 -O2 -Wall -Wextra -Wno-unknown-pragmas -o "$tmp/fbank_frame_test" fbank_frame_test.cpp
"$tmp/fbank_frame_test"
