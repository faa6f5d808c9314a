package fbank

import (
	"context"
	"fmt"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/npy"
)

func init() {
	runtime.Register(runtime.OpSpec{
		Name: "fbank",
		Doc: "Log-mel filterbank features (Whisper, Parakeet/NeMo and related frontends). Set preset=, " +
			"then override any knob. Batched items are framed and normalised independently.",
		Inputs: []runtime.TensorSpec{
			{Name: "pcm", DTypes: []runtime.DType{runtime.F32}, Dims: []string{"B", "N"}, BatchOptional: true,
				Doc: "mono samples at sample_rate, nominally in [-1, 1]; finite"},
			{Name: "lengths", DTypes: []runtime.DType{runtime.I64}, Dims: []string{"B"}, Optional: true, Host: true,
				Doc: "samples per item (1..N); absent: every item has N"},
		},
		Outputs: []runtime.TensorSpec{
			{Name: "features", DTypes: []runtime.DType{runtime.F32}, Dims: []string{"B", "M|T", "T|M"},
				Doc: "[B, n_mels, T] (layout=mel_time) or [B, T, n_mels] (time_mel); frames past an item's own are 0"},
			{Name: "lengths", DTypes: []runtime.DType{runtime.I64}, Dims: []string{"B"}, Host: true,
				Doc: "valid frames per item"},
		},
		Params: params,
		New:    newOp,
	})
}

var params = []runtime.ParamSpec{
	{Name: "preset", Kind: runtime.String, Enum: Presets(), Doc: "base configuration (required); the knobs below override it"},
	{Name: "sample_rate", Kind: runtime.Int, Doc: "Hz; pcm must already be at this rate"},
	{Name: "num_mels", Kind: runtime.Int, Doc: "mel filters"},
	{Name: "n_fft", Kind: runtime.Int, Doc: "FFT size (any size >= 2; 2/3/5-smooth sizes are fastest)"},
	{Name: "win_length", Kind: runtime.Int, Doc: "window length in samples (<= n_fft, centred in it)"},
	{Name: "hop_length", Kind: runtime.Int, Doc: "samples between frames"},
	{Name: "pre_emphasis", Kind: runtime.Float, Doc: "y[i] = x[i] - a x[i-1]; 0 disables"},
	{Name: "f_min", Kind: runtime.Float, Doc: "lowest mel edge, Hz"},
	{Name: "f_max", Kind: runtime.Float, Doc: "highest mel edge, Hz (<= sample_rate/2)"},
	{Name: "pad_mode", Kind: runtime.String, Enum: []string{"reflect", "constant", "none"}, Doc: "signal padding (none: center=False, window left-aligned)"},
	{Name: "window_type", Kind: runtime.String, Enum: []string{"hann_symmetric", "hann_periodic"}, Doc: "analysis window"},
	{Name: "normalize", Kind: runtime.String, Enum: []string{"per_feature", "per_utterance", "none", "global", "fixed"}, Doc: "post-log normalisation (fixed: fixed_mean/fixed_std)"},
	{Name: "valid_frames", Kind: runtime.String, Enum: []string{"stft", "floor", "ceil"}, Doc: "valid-frame rule of per_feature/none: N/hop+1 | N/hop | ceil(N/hop)"},
	{Name: "nemo_seq_len_ceil", Kind: runtime.Boolean, Doc: "true: valid_frames=ceil (seed 003 name)"},
	{Name: "global_log_mel_max", Kind: runtime.Float, Doc: "fixed log10 maximum of normalize=global (preset: 1.5)"},
	{Name: "log_clamp_min", Kind: runtime.Float, Doc: "normalize=none: ln(max(x, v)) instead of ln(x + 2^-24) when > 0"},
	{Name: "filterbank", Kind: runtime.String, Doc: "npy file, f32|f64 [num_mels, n_fft/2+1]: checkpoint filterbank replacing the Slaney one"},
	{Name: "window", Kind: runtime.String, Doc: "npy file, f32|f64 [win_length]: checkpoint window replacing the Hann one"},
	{Name: "fixed_mean", Kind: runtime.String, Doc: "npy file, f32|f64 [num_mels]: normalize=fixed's per-bin mean"},
	{Name: "fixed_std", Kind: runtime.String, Doc: "npy file, f32|f64 [num_mels]: normalize=fixed's per-bin std (> 0)"},
	{Name: "out_frames", Kind: runtime.Int, Doc: "per_utterance/global: emit exactly this many leading frames"},
	{Name: "pad_to_seconds", Kind: runtime.Float, Doc: "zero-pad or truncate each item to this length first (Whisper: 30)"},
	{Name: "layout", Kind: runtime.String, Enum: []string{"mel_time", "time_mel"}, Doc: "per-item output layout"},
	{Name: "threads", Kind: runtime.Int, Default: 0, Doc: "goroutines (0: GOMAXPROCS)"},
}

// ConfigFromParams builds a Config from resolved op parameters: the preset,
// then every parameter that was set.
func ConfigFromParams(p runtime.Params) (Config, error) {
	if p.IsNil("preset") {
		return Config{}, fmt.Errorf("set preset= (one of %v) and override knobs as needed", Presets())
	}
	c, err := Preset(p.Str("preset"))
	if err != nil {
		return Config{}, err
	}
	ints := map[string]*int{"sample_rate": &c.SampleRate, "num_mels": &c.NumMels, "n_fft": &c.NFFT,
		"win_length": &c.WinLength, "hop_length": &c.HopLength, "out_frames": &c.OutFrames}
	for name, dst := range ints {
		if p.IsSet(name) {
			*dst = p.Int(name)
		}
	}
	floats := map[string]*float64{"pre_emphasis": &c.PreEmphasis, "f_min": &c.FMin, "f_max": &c.FMax,
		"log_clamp_min": &c.LogClampMin, "pad_to_seconds": &c.PadToSeconds, "global_log_mel_max": &c.GlobalLogMelMax}
	for name, dst := range floats {
		if p.IsSet(name) {
			*dst = p.Float(name)
		}
	}
	setStr := func(name string, dst *string) {
		if p.IsSet(name) {
			*dst = p.Str(name)
		}
	}
	setStr("pad_mode", (*string)(&c.PadMode))
	setStr("window_type", (*string)(&c.WindowType))
	setStr("normalize", (*string)(&c.Normalize))
	setStr("valid_frames", (*string)(&c.ValidFrames))
	setStr("layout", (*string)(&c.Layout))
	if p.Bool("nemo_seq_len_ceil") {
		if p.IsSet("valid_frames") && c.ValidFrames != ValidCeil {
			return Config{}, fmt.Errorf("nemo_seq_len_ceil=true contradicts valid_frames=%s", c.ValidFrames)
		}
		c.ValidFrames = ValidCeil
	}
	if p.IsSet("filterbank") {
		if c.Filterbank, err = loadVector(p.Str("filterbank"), "filterbank", c.NumMels, c.NFFT/2+1); err != nil {
			return Config{}, err
		}
	}
	for name, dst := range map[string]*[]float64{"fixed_mean": &c.FixedMean, "fixed_std": &c.FixedStd} {
		if p.IsSet(name) {
			if *dst, err = loadVector(p.Str(name), name, c.NumMels); err != nil {
				return Config{}, err
			}
		}
	}
	if p.IsSet("window") {
		if c.Window, err = loadVector(p.Str("window"), "window", c.WinLength); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// loadVector reads an f32 or f64 npy file of exactly the given shape as float64s.
func loadVector(path, what string, shape ...int) ([]float64, error) {
	t, err := npy.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !t.Shape().Equal(runtime.Shape(shape)) {
		return nil, fmt.Errorf("%s %s has shape %v, want %v", what, path, t.Shape(), runtime.Shape(shape))
	}
	switch t.DType() {
	case runtime.F32:
		out := make([]float64, len(t.F32()))
		for i, v := range t.F32() {
			out[i] = float64(v)
		}
		return out, nil
	case runtime.F64:
		return append([]float64(nil), t.F64()...), nil
	}
	return nil, fmt.Errorf("%s %s is %v, want f32 or f64", what, path, t.DType())
}

type op struct {
	fe      *Frontend
	threads int
}

func newOp(p runtime.Params, b runtime.Backend) (runtime.Op, error) {
	if b.Name() != "cpu" {
		return nil, fmt.Errorf("no %s implementation yet (use the cpu backend)", b.Name())
	}
	cfg, err := ConfigFromParams(p)
	if err != nil {
		return nil, err
	}
	fe, err := NewFrontend(cfg)
	if err != nil {
		return nil, err
	}
	if p.Int("threads") < 0 {
		return nil, fmt.Errorf("threads %d: want >= 0", p.Int("threads"))
	}
	return &op{fe: fe, threads: p.Int("threads")}, nil
}

// Run splits pcm into items (trimmed to lengths when given) and computes
// their features.
func (o *op) Run(ctx context.Context, in runtime.Tensors) (runtime.Tensors, error) {
	pcm := in["pcm"]
	batch, n := 1, pcm.Shape()[0]
	if pcm.Rank() == 2 {
		batch, n = pcm.Shape()[0], pcm.Shape()[1]
	}
	if batch == 0 {
		return nil, fmt.Errorf("input \"pcm\" has shape %v, want at least one item", pcm.Shape())
	}
	data := pcm.F32()
	clips := make([][]float32, batch)
	for b := range clips {
		clips[b] = data[b*n : (b+1)*n]
	}
	if lt := in["lengths"]; lt != nil {
		if lt.Shape()[0] != batch {
			return nil, fmt.Errorf("input \"lengths\" has shape %v, want [%d] (one per pcm item)", lt.Shape(), batch)
		}
		for b, l := range lt.I64() {
			if l < 0 || l > int64(n) {
				return nil, fmt.Errorf("input \"lengths\"[%d] = %d, want 0..%d (the pcm row length)", b, l, n)
			}
			clips[b] = clips[b][:l]
		}
	}
	f, err := o.fe.Compute(ctx, clips, o.threads)
	if err != nil {
		return nil, err
	}
	shape := runtime.Shape{f.Batch, f.Mels, f.Frames}
	if f.Layout == TimeMel {
		shape = runtime.Shape{f.Batch, f.Frames, f.Mels}
	}
	feats, err := runtime.FromSlice(runtime.F32, shape, f.Data)
	if err != nil {
		return nil, err
	}
	lengths, err := runtime.FromSlice(runtime.I64, runtime.Shape{f.Batch}, f.Lengths)
	if err != nil {
		return nil, err
	}
	return runtime.Tensors{"features": feats, "lengths": lengths}, nil
}
