#!/usr/bin/env bash
# Builds kernels/edge.fatbin from every kernels/*.cu with nvcc (13.0 on the
# GPU host) and rewrites kernels/manifest.json: the nvcc version, the
# targets, the sha256 of every source (*.cu, *.cuh, *.h) and of the fatbin.
# The fatbin holds SASS for sm_87 (Jetson Orin), sm_90a (H100/H200) and
# sm_110 (Thor) plus compute_87 PTX, which the driver compiles for any newer
# GPU.
#
#   kernels/build.sh [OUTDIR]     (default: kernels/; OUTDIR also gets ptxas.log)
#
# All *.cu files go into one translation unit (each keeps its helpers in its
# own namespace), so the fatbin is one module with every kernel.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
NVCC=${NVCC:-nvcc}
targets=(
  -gencode=arch=compute_87,code=sm_87
  -gencode=arch=compute_90a,code=sm_90a
  -gencode=arch=compute_110,code=sm_110
  -gencode=arch=compute_87,code=compute_87
)
if [[ -n ${EDGE_KERNELS_TARGETS:-} ]]; then  # local syntax checks with an older nvcc
  read -r -a targets <<<"$EDGE_KERNELS_TARGETS"
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
unity="$tmp/edge_kernels.cu"
: >"$unity"
for f in "$here"/*.cu; do echo "#include \"$f\"" >>"$unity"; done
# NVCC_EXTRA: more flags for experiments (e.g. -DFBANK_MIN_BLOCKS=3); the
# committed fatbin is built without.
read -r -a extra <<<"${NVCC_EXTRA:-}"
"$NVCC" -fatbin --threads 0 -O3 -std=c++17 -lineinfo -I"$here" "${targets[@]}" "${extra[@]}" -Xptxas -v \
  -o "$out/edge.fatbin" "$unity" 2> >(tee "$out/ptxas.log" >&2)
version=$("$NVCC" --version | grep -o 'release [0-9.]*, V[0-9.]*' || "$NVCC" --version | tail -1)
{
  echo "{"
  echo "  \"nvcc\": \"$version\","
  printf '  "targets": "%s",\n' "${targets[*]}"
  printf '  "flags": "%s",\n' "-O3 -std=c++17 -lineinfo ${extra[*]}"
  echo "  \"fatbin\": \"$(sha256sum "$out/edge.fatbin" | cut -d' ' -f1)\","
  echo "  \"sources\": {"
  first=1
  for f in $(cd "$here" && ls *.cu *.cuh *.h | sort); do
    [[ $first == 1 ]] || echo ","
    first=0
    printf '    "%s": "%s"' "$f" "$(sha256sum "$here/$f" | cut -d' ' -f1)"
  done
  echo
  echo "  }"
  echo "}"
} >"$out/manifest.json"
echo "build.sh: wrote $out/edge.fatbin ($(stat -c %s "$out/edge.fatbin") bytes) and $out/manifest.json" >&2
