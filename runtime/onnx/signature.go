package onnx

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/edgespeech/edge/runtime/model"
)

// port is one model input or output the encoder uses.
type port struct {
	edge string // edge-side name (model.InputFeatures, ...)
	info ort.InputOutputInfo
}

func (p *port) name() string { return p.info.Name }

// signature is how the encoder feeds a model and reads its results, checked
// against the model's declared inputs and outputs.
type signature struct {
	input      *port // features or pcm
	inLengths  *port // optional
	inMask     *port // optional
	output     *port // log_probs or logits
	outLengths *port // optional
	logits     bool  // output needs a log-softmax
	layout     string
	melAxis    int  // axis of the mel dimension in features (1 or 2), -1 for pcm
	vocab      int  // vocabulary size to check V against; 0 when unknown
	f16In      bool // the features/pcm input is float16 (cast at the boundary)
	f16Out     bool // the scores output is float16
}

// describe renders declared I/O as `audio_signal f32 [batch,128,time]`.
func describe(infos []ort.InputOutputInfo) string {
	parts := make([]string, len(infos))
	for i, x := range infos {
		parts[i] = fmt.Sprintf("%s %s %s", x.Name, elemName(x.DataType), dimsString(x.Dimensions))
	}
	return strings.Join(parts, ", ")
}

func dimsString(d ort.Shape) string {
	parts := make([]string, len(d))
	for i, v := range d {
		if v < 0 {
			parts[i] = "?"
		} else {
			parts[i] = fmt.Sprint(v)
		}
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func elemName(t ort.TensorElementDataType) string {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return "f32"
	case ort.TensorElementDataTypeDouble:
		return "f64"
	case ort.TensorElementDataTypeFloat16:
		return "f16"
	case ort.TensorElementDataTypeBFloat16:
		return "bf16"
	case ort.TensorElementDataTypeInt64:
		return "i64"
	case ort.TensorElementDataTypeInt32:
		return "i32"
	case ort.TensorElementDataTypeBool:
		return "bool"
	}
	return t.String()
}

// want is what the encoder accepts for one edge-side name.
type want struct {
	rank  int
	types []ort.TensorElementDataType
}

var (
	float32Only = []ort.TensorElementDataType{ort.TensorElementDataTypeFloat}
	// floats: fp16 graphs are cast at the boundary (f32 <-> f16 on the host).
	floats    = []ort.TensorElementDataType{ort.TensorElementDataTypeFloat, ort.TensorElementDataTypeFloat16}
	intTypes  = []ort.TensorElementDataType{ort.TensorElementDataTypeInt64, ort.TensorElementDataTypeInt32}
	maskTypes = []ort.TensorElementDataType{ort.TensorElementDataTypeInt64, ort.TensorElementDataTypeInt32, ort.TensorElementDataTypeBool}
)

var wants = map[string]map[string]want{
	"inputs": {
		model.InputFeatures:      {3, floats},
		model.InputPCM:           {2, floats},
		model.InputLengths:       {1, intTypes},
		model.InputAttentionMask: {2, maskTypes},
	},
	"outputs": {
		model.OutputLogProbs: {3, floats},
		model.OutputLogits:   {3, floats},
		model.OutputLengths:  {1, intTypes},
	},
}

// bind checks names (edge name -> ONNX name) against the model's declared
// inputs or outputs (kind "inputs" or "outputs") and returns the ports by
// edge name. Every model input must be bound, since the encoder must feed it.
func bind(kind string, names map[string]string, declared []ort.InputOutputInfo) (map[string]*port, error) {
	edgeNames := make([]string, 0, len(names))
	for e := range names {
		edgeNames = append(edgeNames, e)
	}
	sort.Strings(edgeNames)
	ports := map[string]*port{}
	var errs []string
	for _, e := range edgeNames {
		onnxName := names[e]
		i := slices.IndexFunc(declared, func(x ort.InputOutputInfo) bool { return x.Name == onnxName })
		if i < 0 {
			errs = append(errs, fmt.Sprintf("encoder.%s.%s names ONNX %s %q, which the model does not have (its %s: %s)",
				kind, e, strings.TrimSuffix(kind, "s"), onnxName, kind, describe(declared)))
			continue
		}
		info := declared[i]
		w, ok := wants[kind][e]
		if !ok {
			errs = append(errs, fmt.Sprintf("encoder.%s.%s is not an encoder %s", kind, e, strings.TrimSuffix(kind, "s")))
			continue
		}
		if info.OrtValueType != ort.ONNXTypeTensor || !slices.Contains(w.types, info.DataType) || len(info.Dimensions) != w.rank {
			ts := make([]string, len(w.types))
			for j, t := range w.types {
				ts[j] = elemName(t)
			}
			errs = append(errs, fmt.Sprintf("encoder.%s.%s: the model's %q is %s %s, want a rank-%d %s tensor",
				kind, e, onnxName, elemName(info.DataType), dimsString(info.Dimensions), w.rank, strings.Join(ts, " or ")))
			continue
		}
		ports[e] = &port{edge: e, info: info}
	}
	if kind == "inputs" {
		for _, d := range declared {
			if !slices.ContainsFunc(edgeNames, func(e string) bool { return names[e] == d.Name }) {
				errs = append(errs, fmt.Sprintf("the model's input %q (%s %s) is not mapped in encoder.inputs, so the encoder cannot feed it",
					d.Name, elemName(d.DataType), dimsString(d.Dimensions)))
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("model I/O does not match the manifest:\n  %s", strings.Join(errs, "\n  "))
	}
	return ports, nil
}

// newSignature binds a manifest's encoder names to the model's declared I/O
// and checks the layout and vocabulary size where the model fixes them.
func newSignature(m *model.Manifest, ins, outs []ort.InputOutputInfo) (*signature, error) {
	in, err := bind("inputs", m.Encoder.Inputs, ins)
	if err != nil {
		return nil, err
	}
	out, err := bind("outputs", m.Encoder.Outputs, outs)
	if err != nil {
		return nil, err
	}
	s := &signature{
		input:      in[model.InputFeatures],
		inLengths:  in[model.InputLengths],
		inMask:     in[model.InputAttentionMask],
		output:     out[model.OutputLogProbs],
		outLengths: out[model.OutputLengths],
		layout:     m.Layout(),
		melAxis:    -1,
	}
	if s.input == nil {
		s.input = in[model.InputPCM]
	}
	if s.output == nil {
		s.output, s.logits = out[model.OutputLogits], true
	}
	if s.input == nil || s.output == nil { // model.Parse rules this out; a hand-made Manifest may not
		return nil, fmt.Errorf("the manifest maps no encoder input (features or pcm) or no output (log_probs or logits)")
	}
	if m.Vocab != nil {
		s.vocab = m.Vocab.Len()
	}
	s.f16In = s.input.info.DataType == ort.TensorElementDataTypeFloat16
	s.f16Out = s.output.info.DataType == ort.TensorElementDataTypeFloat16
	if s.input.edge == model.InputFeatures {
		s.melAxis = 1
		if s.layout == model.LayoutTimeMel {
			s.melAxis = 2
		}
		d := s.input.info.Dimensions
		other := 3 - s.melAxis
		if d[s.melAxis] < 0 && d[other] > 0 {
			return nil, fmt.Errorf("frontend.layout %s puts the mels on axis %d, but the model's %q %s fixes only axis %d: is the layout %s?",
				layoutName(s.layout), s.melAxis, s.input.name(), dimsString(d), other, otherLayout(s.layout))
		}
	}
	if v := s.output.info.Dimensions[2]; v > 0 && s.vocab > 0 && int(v) != s.vocab {
		return nil, fmt.Errorf("the vocabulary %s has %d tokens, but the model's %q %s has V=%d",
			m.VocabularyPath(), s.vocab, s.output.name(), dimsString(s.output.info.Dimensions), v)
	}
	return s, nil
}

func layoutName(l string) string {
	if l == "" {
		return model.LayoutMelTime + " (the default)"
	}
	return l
}

func otherLayout(l string) string {
	if l == model.LayoutTimeMel {
		return model.LayoutMelTime
	}
	return model.LayoutTimeMel
}

// conventionalManifest builds encoder names for a bare .onnx file from the
// model's own signature: one float input of rank 3 (features, mel_time) or
// rank 2 (pcm), an optional integer lengths input of rank 1 and mask of rank
// 2; one float output of rank 3 (log-probs when its name contains "log" and
// "prob", else logits) and an optional integer lengths output of rank 1.
// Anything else is ambiguous and needs a manifest.
func conventionalManifest(path string, ins, outs []ort.InputOutputInfo) (*model.Manifest, error) {
	m := &model.Manifest{Encoder: model.Encoder{File: path, Inputs: map[string]string{}, Outputs: map[string]string{}}}
	assign := func(kind string, dst map[string]string, key string, x ort.InputOutputInfo) error {
		if prev, dup := dst[key]; dup {
			return fmt.Errorf("%s: cannot tell which of the inputs/outputs %q and %q is the %s (model %s: %s); write a model.yaml manifest naming them",
				path, prev, x.Name, key, kind, describe(append(append([]ort.InputOutputInfo{}, ins...), outs...)))
		}
		dst[key] = x.Name
		return nil
	}
	isFloat := func(x ort.InputOutputInfo) bool { return x.DataType == ort.TensorElementDataTypeFloat }
	for _, x := range ins {
		var key string
		switch r := len(x.Dimensions); {
		case isFloat(x) && r == 3:
			key = model.InputFeatures
		case isFloat(x) && r == 2:
			key = model.InputPCM
		case !isFloat(x) && r == 1:
			key = model.InputLengths
		case !isFloat(x) && r == 2:
			key = model.InputAttentionMask
		default:
			return nil, fmt.Errorf("%s: input %q (%s %s) fits no encoder input; write a model.yaml manifest", path, x.Name, elemName(x.DataType), dimsString(x.Dimensions))
		}
		if err := assign("inputs", m.Encoder.Inputs, key, x); err != nil {
			return nil, err
		}
	}
	scores := ""
	for _, x := range outs {
		switch r := len(x.Dimensions); {
		case isFloat(x) && r == 3:
			if err := assign("outputs", m.Encoder.Outputs, "scores", x); err != nil {
				return nil, err
			}
			scores = x.Name
		case !isFloat(x) && r == 1:
			if err := assign("outputs", m.Encoder.Outputs, model.OutputLengths, x); err != nil {
				return nil, err
			}
		}
	}
	delete(m.Encoder.Outputs, "scores")
	if scores != "" {
		lower := strings.ToLower(scores)
		if strings.Contains(lower, "log") && strings.Contains(lower, "prob") {
			m.Encoder.Outputs[model.OutputLogProbs] = scores
		} else {
			m.Encoder.Outputs[model.OutputLogits] = scores
		}
	}
	if _, ok := m.Encoder.Inputs[model.InputFeatures]; ok {
		m.Frontend = map[string]any{"layout": model.LayoutMelTime}
	}
	_, feat := m.Encoder.Inputs[model.InputFeatures]
	_, pcm := m.Encoder.Inputs[model.InputPCM]
	_, lp := m.Encoder.Outputs[model.OutputLogProbs]
	_, lg := m.Encoder.Outputs[model.OutputLogits]
	if !feat && !pcm || !lp && !lg {
		return nil, fmt.Errorf("%s does not look like a CTC encoder (inputs: %s; outputs: %s): want a float features [B,n_mels,T] or pcm [B,N] input and a float [B,T',V] output; write a model.yaml manifest",
			path, describe(ins), describe(outs))
	}
	m.Normalize = model.NormalizeNone
	return m, nil
}
