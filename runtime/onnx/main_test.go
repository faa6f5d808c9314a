package onnx

import (
	"fmt"
	"os"
	"testing"
)

// TestMain loads ONNX Runtime once for the package. Without a library every
// test fails with the instruction to provision it: a missing runtime is a
// broken setup, not a reason to skip (the Makefile runs scripts/fetch-ort.sh first).
func TestMain(m *testing.M) {
	if err := Init(""); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL runtime/onnx: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
