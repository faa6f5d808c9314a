#!/usr/bin/env bash
# gpu-test.sh BINDIR OUT [NAME[:ARGS] ...]: runs -tags cuda test binaries on
# a GPU host (which has no Go toolchain) from the repository root there.
#
#   here:  make test-cuda-bin KERNELS=external
#          mkdir -p bin/gpu-carry/bin && for f in bin/cuda/*.test; do xz -c $f > bin/gpu-carry/bin/${f##*/}.xz; done
#   there: scripts/gpu-test.sh bin/gpu-carry/bin $OUT asr:'-test.run CUDA' plugins_dpx
#
# BINDIR holds NAME.test or NAME.test.xz (NAME as test-cuda-bin writes it:
# the package path with / as _, e.g. plugins_fbank). Each named binary (every
# one in BINDIR when none is named) runs in its package's directory, with
# ARGS (default -test.v), its output in OUT/NAME.log. The environment: the
# repository's kernels/edge.fatbin ($EDGE_KERNELS_FATBIN, for binaries built
# with KERNELS=external), the host's own ONNX Runtime core from its python
# onnxruntime package ($EDGE_ORT_LIB), the CUDA libraries of its python nvidia
# packages on LD_LIBRARY_PATH, and ONNX Runtime's CUDA plugin EP when
# $EDGE_ORT_CUDA_EP names it (scripts/ort-cuda-ep.sh unpack). Exit status: the
# number of binaries that failed.
set -uo pipefail
bindir=${1:?usage: gpu-test.sh BINDIR OUT [NAME[:ARGS] ...]}
out=${2:?usage: gpu-test.sh BINDIR OUT [NAME[:ARGS] ...]}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
sp=$(python3 -c 'import onnxruntime, os; print(os.path.dirname(os.path.dirname(onnxruntime.__file__)))')
ld=$(ls -d "$sp"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH=${ld}${LD_LIBRARY_PATH:-}
export EDGE_ORT_LIB=${EDGE_ORT_LIB:-$(ls "$sp"/onnxruntime/capi/libonnxruntime.so.1.* | head -1)}
export EDGE_KERNELS_FATBIN=${EDGE_KERNELS_FATBIN:-$root/kernels/edge.fatbin}
bins=$(mktemp -d)
if [[ $# -eq 0 ]]; then
	for f in "$bindir"/*.test*; do n=${f##*/}; set -- "$@" "${n%%.test*}"; done
fi
failed=0
for spec in "$@"; do
	name=${spec%%:*}
	args=-test.v
	[[ $spec == *:* ]] && args=${spec#*:}
	if [[ -f $bindir/$name.test.xz ]]; then
		xz -dc "$bindir/$name.test.xz" > "$bins/$name.test"
	elif [[ -f $bindir/$name.test ]]; then
		cp "$bindir/$name.test" "$bins/$name.test"
	else
		echo "gpu-test.sh: no $name.test or $name.test.xz in $bindir" | tee -a "$out/summary.txt"
		failed=$((failed + 1))
		continue
	fi
	chmod +x "$bins/$name.test"
	dir=$root/${name//_//}
	[[ -d $dir ]] || dir=$root
	start=$(date +%s)
	# shellcheck disable=SC2086 # ARGS are words for the test binary
	(cd "$dir" && "$bins/$name.test" $args) > "$out/$name.log" 2>&1
	rc=$?
	echo "$name ($args): exit $rc in $(($(date +%s) - start)) s, $(grep -c -e '--- FAIL' "$out/$name.log") FAIL, $(grep -c -e '--- PASS' "$out/$name.log") PASS" | tee -a "$out/summary.txt"
	[[ $rc -eq 0 ]] || failed=$((failed + 1))
done
rm -rf "$bins"
exit "$failed"
