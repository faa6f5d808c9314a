package onnx_test

import (
	"context"
	"fmt"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/onnx"
)

// Open a model directory once, run it on a batch, close it.
func ExampleOpen() {
	enc, err := onnx.Open("testdata/nemo", onnx.Options{Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer enc.Close()
	feats := runtime.Must(runtime.NewTensor(runtime.F32, runtime.Shape{2, 128, 100})) // [B, n_mels, T]
	lengths := runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{2}, []int64{100, 60}))
	out, err := enc.Run(context.Background(), runtime.Tensors{"features": feats, "lengths": lengths})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(enc.InputName(), out["log_probs"].Shape(), out["lengths"].I64())
	// Output: features [2,25,29] [25 15]
}

// The encoder is also an op, for pipelines and `edge op encoder`.
func ExampleOpen_op() {
	inst, err := runtime.New("encoder", map[string]any{"model": "testdata/w2v", "threads": 1}, runtime.CPU)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer inst.Close()
	pcm := runtime.Must(runtime.NewTensor(runtime.F32, runtime.Shape{1, 16000})) // 1 s at 16 kHz
	out, err := inst.Run(context.Background(), runtime.Tensors{"pcm": pcm})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out["log_probs"].Shape(), out["lengths"].I64())
	// Output: [1,49,32] [49]
}
