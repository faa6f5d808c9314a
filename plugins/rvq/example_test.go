package rvq_test

import (
	"context"
	"fmt"

	"github.com/edgespeech/edge/plugins/rvq"
)

// Two stages of width 2: the second refines what the first leaves over.
func ExampleCodebooks_Encode() {
	cb, err := rvq.NewCodebooks(2,
		[]float32{1, 0, 0, 1, -1, 0}, // stage 0: 3 entries
		[]float32{0.25, 0, 0, 0.25},  // stage 1: 2 entries
	)
	if err != nil {
		panic(err)
	}
	x := []float32{1.2, 0.1, 0.1, 0.9} // B = 1 item of T = 2 frames
	codes := make([]int32, 2*cb.NumStages())
	quantized := make([]float32, len(x))
	if err := cb.Encode(context.Background(), x, rvq.Batch{B: 1, T: 2}, codes, quantized); err != nil {
		panic(err)
	}
	fmt.Println(codes, quantized)

	back := make([]float32, len(x))
	if err := cb.Decode(context.Background(), codes, rvq.Batch{B: 1, T: 2}, back); err != nil {
		panic(err)
	}
	fmt.Println(back)
	// Output:
	// [0 0 1 0] [1.25 0 0.25 1]
	// [1.25 0 0.25 1]
}
