package onnx

import (
	"errors"
	"fmt"
	"strings"

	"github.com/edgespeech/edge/runtime/model"
)

// ErrPluginSlice is wrapped by the error for a model the CUDA plugin EP
// would crash on (see pluginSliceError).
var ErrPluginSlice = errors.New("the CUDA plugin EP cannot run this model")

// pluginSliceFixed is the first ONNX Runtime core with which the CUDA
// plugin EP is not known to crash on Slice nodes: none is known yet, so
// every core before the next unchecked release is guarded.
var pluginSliceFixed = [3]int{1, 31, 0}

// pluginSliceError says why ONNX Runtime's CUDA plugin EP (1.29, the only
// CUDA 13 plugin build) must not run the model at path with core version
// coreVersion: that EP crashes the whole process (SIGSEGV inside Run) on
// Slice nodes (seen on the H200 with run-time bounds, torch's chunk() and
// NeMo's relative position shift, and with constant ones, wav2vec2's
// SamePad), so a model with any is refused with an error naming them. nil when
// the model has none, the core is newer than the releases known to crash,
// or the file cannot be read (ONNX Runtime then reports it).
func pluginSliceError(path, coreVersion string) error {
	if v, err := parseVersion(coreVersion); err != nil || !versionLess(v, pluginSliceFixed) {
		return nil
	}
	slices, err := model.SliceNodes(path)
	if err != nil || len(slices) == 0 {
		return nil
	}
	shown := slices
	if len(shown) > 3 {
		shown = append(shown[:3:3], "...")
	}
	return fmt.Errorf("%w: %s has %d Slice node(s) (%s), and ONNX Runtime's CUDA plugin EP "+
		"crashes the process on them with this core (%s); use --fallback cpu, an ONNX Runtime with the CUDA EP built in "+
		"(onnxruntime-gpu, JetPack), or an export without them (models/scripts/chunk_split.py rewrites torch's chunk() pattern)",
		ErrPluginSlice, path, len(slices), strings.Join(shown, ", "), coreVersion)
}
