package onnx

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/edgespeech/edge/runtime/model"
	ort "github.com/yalue/onnxruntime_go"
)

// ErrPluginSlice is wrapped by the error for a model the CUDA plugin EP
// would crash on and that cannot be rewritten (see slicesRewritten).
var ErrPluginSlice = errors.New("the CUDA plugin EP cannot run this model")

// pluginSliceFixed is the first ONNX Runtime core with which the CUDA
// plugin EP is not known to crash on Slice nodes: none is known yet, so
// every core before the next unchecked release is guarded.
var pluginSliceFixed = [3]int{1, 31, 0}

// pluginCrashesOnSlices says whether ONNX Runtime's CUDA plugin EP (1.29,
// the only CUDA 13 plugin build) crashes with core version coreVersion on
// Slice nodes: it crashes the whole process (SIGSEGV inside Run) on any of
// them, whatever their bounds (seen on the H200 with torch's chunk(),
// NeMo's relative position shift and wav2vec2's SamePad), with every core
// before pluginSliceFixed.
func pluginCrashesOnSlices(coreVersion string) bool {
	v, err := parseVersion(coreVersion)
	return err == nil && versionLess(v, pluginSliceFixed)
}

// slicesRewritten returns the model at path with its Slice nodes rewritten
// as Gathers of Ranges (model.SlicesAsGathers: the same values), for a
// session on an EP that crashes on Slice. nil when the model has no Slice
// or the file cannot be read (ONNX Runtime then reports it); an error
// wrapping ErrPluginSlice when a Slice cannot be rewritten.
func slicesRewritten(path string) ([]byte, error) {
	data, _, err := model.SlicesAsGathers(path)
	if errors.Is(err, model.ErrSliceRewrite) {
		return nil, fmt.Errorf("%w: ONNX Runtime's CUDA plugin EP crashes the process on Slice nodes with this core (%s), "+
			"and %v; use --fallback cpu, an ONNX Runtime with the CUDA EP built in (onnxruntime-gpu, JetPack), "+
			"or an export without them", ErrPluginSlice, Version(), err)
	}
	if err != nil {
		return nil, nil
	}
	return data, nil
}

// newSessionFromBytes creates a session for data, a model rewritten from
// the file at path by slicesRewritten: its external data, if any, is read
// from path's directory, and ONNX Runtime must not fuse the Gathers back
// into Slices.
func newSessionFromBytes(data []byte, path string, inNames, outNames []string, so *ort.SessionOptions) (*ort.DynamicAdvancedSession, error) {
	for _, kv := range [][2]string{
		{"optimization.disable_specified_optimizers", model.GatherToSliceFusion},
		{"session.model_external_initializers_file_folder_path", filepath.Dir(path)},
	} {
		if err := so.AddSessionConfigEntry(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	return ort.NewDynamicAdvancedSessionWithONNXData(data, inNames, outNames, so)
}
