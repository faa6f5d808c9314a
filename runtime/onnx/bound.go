package onnx

import (
	"context"
	"fmt"
	goruntime "runtime"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
)

// boundRun runs the model through the IoBinding (Options.Bind). The input
// is the f32 tensor of shape at addr in the memory of in (wrapped, not
// copied); lengths and mask are small host tensors ONNX Runtime moves where
// the model needs them; the scores output is left by ONNX Runtime in
// e.outInfo's memory and returned (the caller releases it), with the
// model's own output lengths when it has them (nil otherwise). length is
// the frames (samples) per item; e.mu is held.
func (e *Encoder) boundRun(ctx context.Context, in *memoryInfo, addr uintptr, shape runtime.Shape, length int, lengths []int64) (*boundOutput, []int64, error) {
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	elem, size := ort.TensorElementDataType(ort.TensorElementDataTypeFloat), int64(4)
	if e.sig.f16In {
		if in != e.cpuInfo {
			return nil, nil, fmt.Errorf("the model's %s is float16: it takes its input from host memory (run it on the cpu backend)", e.sig.input.name())
		}
		elem, size = ort.TensorElementDataTypeFloat16, 2 // addr holds the cast input
	}
	x, err := newValue(in, addr, int64(shape.NumElements())*size, dims, elem)
	if err != nil {
		return nil, nil, fmt.Errorf("wrapping input %q: %w", e.sig.input.edge, err)
	}
	defer x.release()
	aux, err := e.auxValues(lengths, length)
	defer func() {
		for _, v := range aux {
			v.Destroy()
		}
	}()
	if err != nil {
		return nil, nil, err
	}
	b := e.bind
	defer b.clear()
	if err := b.input(e.sig.input.name(), x); err != nil {
		return nil, nil, err
	}
	var auxNames []string
	for _, p := range []*port{e.sig.inLengths, e.sig.inMask} {
		if p != nil {
			auxNames = append(auxNames, p.name())
		}
	}
	for i, v := range aux {
		if err := b.b.BindInput(auxNames[i], v); err != nil {
			return nil, nil, fmt.Errorf("binding input %s: %w", auxNames[i], err)
		}
	}
	if err := b.outputTo(e.sig.output.name(), e.outInfo); err != nil {
		return nil, nil, err
	}
	if e.sig.outLengths != nil {
		if err := b.outputTo(e.sig.outLengths.name(), e.cpuInfo); err != nil {
			return nil, nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := e.sess.RunWithBinding(b.b); err != nil {
		return nil, nil, fmt.Errorf("running the model on %s %v: %w", e.sig.input.edge, shape, err)
	}
	outs, err := b.outputs()
	if err != nil {
		return nil, nil, err
	}
	want := 1
	if e.sig.outLengths != nil {
		want = 2
	}
	fail := func(err error) (*boundOutput, []int64, error) {
		for _, o := range outs {
			o.release()
		}
		return nil, nil, err
	}
	if len(outs) != want {
		return fail(fmt.Errorf("the bound run gave %d outputs, want %d", len(outs), want))
	}
	if outs[0].elem != ort.TensorElementDataTypeFloat && outs[0].elem != ort.TensorElementDataTypeFloat16 {
		return fail(fmt.Errorf("the model's %s is %v, want float", e.sig.output.name(), outs[0].elem))
	}
	var modelLengths []int64
	if want == 2 {
		o := outs[1]
		switch o.elem {
		case ort.TensorElementDataTypeInt64:
			modelLengths = make([]int64, o.elements())
			err = o.copyTo(modelLengths)
		case ort.TensorElementDataTypeInt32:
			l32 := make([]int32, o.elements())
			if err = o.copyTo(l32); err == nil {
				modelLengths = make([]int64, len(l32))
				for i, v := range l32 {
					modelLengths[i] = int64(v)
				}
			}
		default:
			err = fmt.Errorf("the model's %s is %v, want an integer tensor", e.sig.outLengths.name(), o.elem)
		}
		if err != nil {
			return fail(err)
		}
		o.release()
	}
	return outs[0], modelLengths, nil
}

// runBoundHost is Run's IoBinding path for host data: the input is pinned
// and wrapped in place, the output copied from ONNX Runtime's memory (host
// memory on the CPU provider; on a GPU provider ORT copies it to the host
// first, as it does for the default Run).
func (e *Encoder) runBoundHost(ctx context.Context, data []float32, shape runtime.Shape, length int, lengths []int64) (runtime.Tensors, error) {
	var pin goruntime.Pinner
	addr := uintptr(unsafe.Pointer(&data[0]))
	pin.Pin(&data[0])
	if e.sig.f16In {
		h := toFloat16(data)
		pin.Pin(&h[0])
		addr = uintptr(unsafe.Pointer(&h[0]))
		defer goruntime.KeepAlive(h)
	}
	defer pin.Unpin()
	if e.outInfo != e.cpuInfo {
		return nil, fmt.Errorf("input %q is in host memory, but the encoder binds its output to %s memory: run it on the cuda backend", e.sig.input.edge, e.provider)
	}
	out, modelLengths, err := e.boundRun(ctx, e.cpuInfo, addr, shape, length, lengths)
	if err != nil {
		return nil, err
	}
	defer out.release()
	batch := shape[0]
	frames, vocab, err := e.checkScores(out.shape, batch, length)
	if err != nil {
		return nil, err
	}
	scores := make([]float32, batch*frames*vocab)
	if out.elem == ort.TensorElementDataTypeFloat16 {
		h := make([]uint16, len(scores))
		if err := out.copyTo(h); err != nil {
			return nil, err
		}
		fromFloat16(scores, h)
	} else if err := out.copyTo(scores); err != nil {
		return nil, err
	}
	if e.sig.logits {
		logSoftmaxRows(scores, vocab)
	}
	lp, err := runtime.FromSlice(runtime.F32, runtime.Shape{batch, frames, vocab}, scores)
	if err != nil {
		return nil, err
	}
	ol, err := e.outputLengths(modelLengths, frames, length, lengths)
	if err != nil {
		return nil, err
	}
	return runtime.Tensors{model.OutputLogProbs: lp, model.OutputLengths: ol}, nil
}
