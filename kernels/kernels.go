// Package kernels holds the project's CUDA kernels: the CUDA C++ sources
// (*.cu, *.cuh, and params.h, the kernels' parameter structs, which
// params.go mirrors for the Go launchers), the fatbin that build.sh makes of them with nvcc on the GPU
// host (SASS for sm_87, sm_90a and sm_110 plus compute_87 PTX), and
// manifest.json, which records the sha256 of every source and of the fatbin.
// TestManifest fails when a source changed and the fatbin and manifest did
// not, so CI catches a stale fatbin without a GPU.
//
// The package is pure Go and GPU-free; only -tags cuda code loads the fatbin
// (runtime/cuda), so default builds carry the bytes but never use them.
package kernels

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
)

//go:embed manifest.json
var manifestJSON []byte

// EnvFatbin names the environment variable that, when set, makes Fatbin read
// the fatbin from that path instead of the embedded one: for running test
// binaries on the GPU host with kernels built there in the same session.
const EnvFatbin = "EDGE_KERNELS_FATBIN"

// Manifest describes the embedded fatbin.
type Manifest struct {
	NVCC    string `json:"nvcc"`    // nvcc release that built the fatbin
	Targets string `json:"targets"` // its -gencode flags
	Fatbin  string `json:"fatbin"`  // sha256 of edge.fatbin, hex
	// Sources maps every *.cu, *.cuh and *.h file name to its sha256, hex.
	Sources map[string]string `json:"sources"`
}

// ReadManifest parses the embedded manifest.json.
func ReadManifest() (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(manifestJSON, &m); err != nil {
		return Manifest{}, fmt.Errorf("kernels: manifest.json: %w", err)
	}
	return m, nil
}

// Fatbin returns the kernel image and where it came from: the file named by
// $EDGE_KERNELS_FATBIN when set, else the embedded edge.fatbin, which must
// match the manifest's hash.
func Fatbin() (image []byte, source string, err error) {
	if p := os.Getenv(EnvFatbin); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, "", fmt.Errorf("kernels: $%s: %w", EnvFatbin, err)
		}
		if len(b) == 0 {
			return nil, "", fmt.Errorf("kernels: $%s=%s is empty", EnvFatbin, p)
		}
		return b, p, nil
	}
	if fatbin == nil {
		return nil, "", fmt.Errorf("kernels: this binary was built with -tags kernels_external and embeds no fatbin: set $%s to kernels/edge.fatbin", EnvFatbin)
	}
	m, err := ReadManifest()
	if err != nil {
		return nil, "", err
	}
	if got := sha256Hex(fatbin); got != m.Fatbin {
		return nil, "", fmt.Errorf("kernels: embedded edge.fatbin (sha256 %s) does not match manifest.json (%s): rebuild with kernels/build.sh", got, m.Fatbin)
	}
	return fatbin, "embedded edge.fatbin (" + m.NVCC + ")", nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
