package vad

import (
	"fmt"
	"os"
	"testing"

	"github.com/edgespeech/edge/runtime/onnx"
)

// TestMain checks once that ONNX Runtime and the model are provisioned: a
// missing one is a broken setup, not a reason to skip (make test fetches
// both first).
func TestMain(m *testing.M) {
	if err := onnx.Init(""); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL plugins/vad: %v\n", err)
		os.Exit(1)
	}
	if _, err := FindModel(""); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL plugins/vad: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
