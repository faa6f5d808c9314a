#!/usr/bin/env bash
# ort-cuda-ep.sh: bring ONNX Runtime's CUDA execution provider (a plugin EP
# library, 230 MB) to a GPU host that can receive only ~26 MiB per transfer.
#
#   scripts/ort-cuda-ep.sh pack PARTSDIR
#       (development machine) fetch the npm package below with `npm pack`
#       into the cache if it is absent, check its sha512 integrity against
#       the pinned value, extract libonnxruntime_providers_cuda.so, check its
#       sha256, xz it, and split the .xz into PARTSDIR/1, PARTSDIR/2, ...
#       (one part of at most 25 MiB each, or $ORT_CUDA_EP_PART_BYTES), every directory also holding
#       manifest.txt (the sha256 of the library, of the .xz and of every part).
#       $ORT_CUDA_EP_XZ may name an already made .xz of the library: it is used
#       (instead of compressing again) once it decompresses to the pinned sha256.
#
#   scripts/ort-cuda-ep.sh core DIR
#       (development machine) the matching ONNX Runtime 1.29.0 core
#       (npm com.github.asus4.onnxruntime@0.4.9, integrity checked):
#       DIR/libonnxruntime.so.1.29.0.xz (~8 MB, sha256 checked) and
#       DIR/libonnxruntime_providers_shared.so. The provider bridge between a
#       core and the CUDA EP library is not ABI-stable across releases: with
#       the GPU host's 1.30 core the 1.29 EP runs simple graphs but may crash
#       on others; this core matches it exactly. On the GPU host:
#       xz -dc DIR/libonnxruntime.so.1.29.0.xz > DEST/libonnxruntime.so.1.29.0
#       and point $EDGE_ORT_LIB at it.
#
#   scripts/ort-cuda-ep.sh unpack SRCDIR DEST
#       (GPU host) SRCDIR holds the part directories 1..n (each with its part
#       and manifest.txt); check every part, concatenate them in order,
#       decompress, check the sha256 and install
#       DEST/libonnxruntime_providers_cuda.so. A missing or corrupt part is
#       an error naming it.
#
# The library is ORT 1.29.0's CUDA EP for CUDA 13 (it needs cuBLAS, cuDNN
# and the CUDA runtime 13 on LD_LIBRARY_PATH at run time); the runtime
# registers it with RegisterExecutionProviderLibrary (runtime/onnx, config
# key ort_cuda_ep or $EDGE_ORT_CUDA_EP).
set -euo pipefail

PKG=com.github.asus4.onnxruntime.linux-x64-gpu
VERSION=0.4.9
INTEGRITY=sha512-FopIhNE/Ng+v2X65wVc9clPCBCvhvA53Hxo2U0Kf5fGdVsC7iCA+mZ0KLWggcQAj7TIZ6pNidR4AC10g74Xo6w==
LIB=libonnxruntime_providers_cuda.so
LIB_IN_TGZ=package/Plugins/Linux/x64/$LIB
LIB_SHA256=56cf3254b118ad837ccc4ed8f6d1b23504bbf7ef91b34cbc0b289cb7f10b3037
PART_BYTES=${ORT_CUDA_EP_PART_BYTES:-$((25 * 1024 * 1024))}
CORE_PKG=com.github.asus4.onnxruntime
CORE_INTEGRITY=sha512-BkzxduSZ9IkeDP6Q8lz2TFU2ie7hSSvS7ZIfzMooExoq0CNzJnuuGaUJ7IsojBgqO4ouD1jXah8OYyJbCN29Fg==
CORE_IN_TGZ=package/Plugins/Linux/x64/libonnxruntime.so
CORE_SHARED_IN_TGZ=package/Plugins/Linux/x64/libonnxruntime_providers_shared.so
CORE_SHA256=5715f06d8992ca8eeeddcce43df3a7d38f97d537052126f558e912cb312460ca

die() { echo "ort-cuda-ep.sh: $*" >&2; exit 1; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }

pack() {
	local parts=$1
	local cache=${XDG_CACHE_HOME:-$HOME/.cache}/edge/ort-cuda-ep/$VERSION
	local tgz=$cache/$PKG-$VERSION.tgz xz=$cache/$LIB.xz
	mkdir -p "$cache"
	if [[ ! -s $xz ]]; then
		if [[ -n ${ORT_CUDA_EP_XZ:-} ]]; then
			echo "checking $ORT_CUDA_EP_XZ"
			local got
			got=$(xz -dc "$ORT_CUDA_EP_XZ" | sha256sum | cut -d' ' -f1)
			[[ $got == "$LIB_SHA256" ]] || die "$ORT_CUDA_EP_XZ decompresses to sha256 $got, want $LIB_SHA256"
			cp "$ORT_CUDA_EP_XZ" "$xz.tmp" && mv "$xz.tmp" "$xz"
		else
			fetch_npm "$PKG" "$INTEGRITY" "$tgz"
			local got
			tar -xzf "$tgz" -C "$cache" "$LIB_IN_TGZ"
			got=$(sha256 "$cache/$LIB_IN_TGZ")
			[[ $got == "$LIB_SHA256" ]] || die "$LIB_IN_TGZ has sha256 $got, want $LIB_SHA256"
			echo "compressing $LIB (xz -9e, takes minutes)"
			xz -9e -T0 -c "$cache/$LIB_IN_TGZ" >"$xz.tmp" && mv "$xz.tmp" "$xz"
			rm -rf "$cache/package"
		fi
	fi
	rm -rf "$parts" && mkdir -p "$parts"
	local tmp
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	split -b "$PART_BYTES" -d -a 3 "$xz" "$tmp/p"
	local files=("$tmp"/p*) n=0
	{
		echo "library $LIB $LIB_SHA256"
		echo "xz $(sha256 "$xz") $(stat -c %s "$xz")"
		echo "parts ${#files[@]}"
		for f in "${files[@]}"; do
			n=$((n + 1))
			echo "part $n $(sha256 "$f") $(stat -c %s "$f")"
		done
	} >"$tmp/manifest.txt"
	n=0
	for f in "${files[@]}"; do
		n=$((n + 1))
		mkdir -p "$parts/$n"
		mv "$f" "$parts/$n/part"
		cp "$tmp/manifest.txt" "$parts/$n/manifest.txt"
	done
	echo "$n parts in $parts/1 .. $parts/$n"
}

# fetch_npm PKG INTEGRITY TGZ: npm pack PKG@$VERSION into TGZ's directory
# unless TGZ is there, then check TGZ against the pinned sha512 integrity
# (npm's "sha512-<base64>" form).
fetch_npm() {
	local pkg=$1 integrity=$2 tgz=$3 got
	if [[ ! -s $tgz ]]; then
		command -v npm >/dev/null || die "npm is needed to fetch $pkg@$VERSION"
		(cd "$(dirname "$tgz")" && npm pack "$pkg@$VERSION" >/dev/null) || die "npm pack $pkg@$VERSION failed"
	fi
	got=sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)
	[[ $got == "$integrity" ]] || die "$tgz has integrity $got, want $integrity (delete it to fetch again)"
}

core() {
	local dir=$1
	local cache=${XDG_CACHE_HOME:-$HOME/.cache}/edge/ort-cuda-ep/$VERSION
	local tgz=$cache/$CORE_PKG-$VERSION.tgz
	mkdir -p "$cache" "$dir"
	fetch_npm "$CORE_PKG" "$CORE_INTEGRITY" "$tgz"
	local got
	local tmp
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	tar -xzf "$tgz" -C "$tmp" "$CORE_IN_TGZ" "$CORE_SHARED_IN_TGZ"
	got=$(sha256 "$tmp/$CORE_IN_TGZ")
	[[ $got == "$CORE_SHA256" ]] || die "$CORE_IN_TGZ has sha256 $got, want $CORE_SHA256"
	xz -9e -T0 -c "$tmp/$CORE_IN_TGZ" >"$dir/libonnxruntime.so.1.29.0.xz"
	cp "$tmp/$CORE_SHARED_IN_TGZ" "$dir/"
	echo "$dir/libonnxruntime.so.1.29.0.xz ($(stat -c %s "$dir/libonnxruntime.so.1.29.0.xz") bytes), $dir/libonnxruntime_providers_shared.so"
}

unpack() {
	local src=$1 dest=$2
	[[ -f $src/1/manifest.txt ]] || die "$src/1/manifest.txt is missing (is $src the directory holding the part directories 1..n?)"
	local manifest=$src/1/manifest.txt n want got size
	n=$(awk '$1 == "parts" {print $2}' "$manifest")
	[[ $n =~ ^[0-9]+$ && $n -ge 1 ]] || die "$manifest names no part count"
	for i in $(seq 1 "$n"); do
		[[ -f $src/$i/part ]] || die "part $i of $n is missing: $src/$i/part"
		want=$(awk -v i="$i" '$1 == "part" && $2 == i {print $3}' "$manifest")
		got=$(sha256 "$src/$i/part")
		[[ $got == "$want" ]] || die "part $i ($src/$i/part) has sha256 $got, want $want: copy it again"
		if [[ -f $src/$i/manifest.txt ]] && ! cmp -s "$manifest" "$src/$i/manifest.txt"; then
			die "part $i comes from another pack run ($src/$i/manifest.txt differs from part 1's)"
		fi
	done
	mkdir -p "$dest"
	want=$(awk '$1 == "library" {print $3}' "$manifest")
	for i in $(seq 1 "$n"); do cat "$src/$i/part"; done | xz -dc >"$dest/$LIB.tmp" ||
		die "decompressing the $n parts failed"
	got=$(sha256 "$dest/$LIB.tmp")
	[[ $got == "$want" ]] || { rm -f "$dest/$LIB.tmp"; die "the reassembled $LIB has sha256 $got, want $want"; }
	chmod 755 "$dest/$LIB.tmp"
	mv "$dest/$LIB.tmp" "$dest/$LIB"
	echo "installed $dest/$LIB ($n parts)"
}

case ${1:-} in
pack)
	[[ $# -eq 2 ]] || die "usage: $0 pack PARTSDIR"
	pack "$2"
	;;
core)
	[[ $# -eq 2 ]] || die "usage: $0 core DIR"
	core "$2"
	;;
unpack)
	[[ $# -eq 3 ]] || die "usage: $0 unpack SRCDIR DEST"
	unpack "$2" "$3"
	;;
*) die "usage: $0 pack PARTSDIR | core DIR | unpack SRCDIR DEST" ;;
esac
