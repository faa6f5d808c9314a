//go:build cuda

package main

// The CUDA backend registers itself; only -tags cuda builds link libcuda.
import _ "github.com/edgespeech/edge/runtime/cuda"
