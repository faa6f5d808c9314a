package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/edgespeech/edge/codec"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/npy"
	"github.com/edgespeech/edge/runtime/onnx"
	"github.com/spf13/pflag"
)

const (
	tokenizeUsage   = "--codec DIR [--bandwidth KBPS | --codebooks N] [--format npy|jsonl|safetensors] --out DIR AUDIO..."
	detokenizeUsage = "--codec DIR CODES.npy|CODES.safetensors [--name NAME] --out AUDIO.wav"
)

func init() {
	register(command{name: "tokenize", usage: tokenizeUsage,
		summary: "neural-codec tokens (EnCodec) of audio files: codes [Q, T] as .npy per file or one JSONL file", run: runTokenize})
	register(command{name: "detokenize", usage: detokenizeUsage,
		summary: "audio (float WAV at the codec rate) from codec tokens [Q, T] (.npy)", run: runDetokenize})
}

func codecFlags(fs interface {
	String(name, value, usage string) *string
	Int(name string, value int, usage string) *int
	Bool(name string, value bool, usage string) *bool
}) {
	fs.String("codec", "", "codec directory: config.json + model.safetensors + encoder.onnx + decoder.onnx (scripts/golden/codec.py writes one)")
	fs.Int("threads", 0, "ONNX Runtime threads (0: its default)")
	fs.String("ort-lib", "", "ONNX Runtime library (default $EDGE_ORT_LIB, then the cache of scripts/fetch-ort.sh)")
	fs.String("backend", "cpu", "where the quantizer runs: cpu, or cuda in -tags cuda builds (rvq_encode_f32, the same codes)")
	fs.String("execution-provider", onnx.ProviderCPU, "ONNX Runtime provider of the codec's encoder and decoder graphs: cpu or cuda")
	fs.String("ort-cuda-ep", "", "ONNX Runtime's CUDA plugin EP library, libonnxruntime_providers_cuda.so (default $"+onnx.EnvCUDAEP+")")
	fs.Bool("cuda-tf32", false, "with --execution-provider cuda, compute the graphs' fp32 convolutions in TF32 (faster; near-tie codes may then differ from the codec's own)")
}

// runTokenize writes the codes of each AUDIO file: decoded, downmixed and
// resampled to the codec's rate, encoded, quantised with the codec's
// codebooks (all of them unless --bandwidth or --codebooks says fewer).
func runTokenize(ctx context.Context, args []string) error {
	fs := newFlags("tokenize", tokenizeUsage)
	codecFlags(fs)
	bandwidth := fs.Float64("bandwidth", 0, "target bandwidth in kbps, one of the codec's target_bandwidths (picks the number of codebooks as transformers does)")
	stages := fs.Int("codebooks", 0, "number of codebooks (RVQ stages) to keep; 0: all, or what --bandwidth gives")
	format := fs.String("format", "npy", "npy: OUT/<name>.npy int32 [Q, T] per input; jsonl: one OUT/codes.jsonl, a line per input; safetensors: one OUT/codes.safetensors, a tensor <name> per input")
	out := fs.String("out", "", "output directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, _ := fs.GetString("codec")
	if dir == "" || *out == "" || fs.NArg() == 0 {
		return fmt.Errorf("need --codec DIR, --out DIR and at least one AUDIO file: %w", errUsage)
	}
	if *format != "npy" && *format != "jsonl" && *format != "safetensors" {
		return fmt.Errorf("unknown --format %q (want npy, jsonl or safetensors): %w", *format, errUsage)
	}
	names, err := outputNames(fs.Args())
	if err != nil {
		return err
	}
	c, done, err := openCodec(fs, dir)
	if err != nil {
		return err
	}
	defer done()
	q, err := codecStages(c, *bandwidth, *stages)
	if err != nil {
		return err
	}
	var lines *bufio.Writer
	if *format == "jsonl" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(*out, "codes.jsonl"))
		if err != nil {
			return err
		}
		defer f.Close()
		lines = bufio.NewWriter(f)
	}
	var shard []codec.CodesTensor
	for i, in := range fs.Args() {
		pcm, err := audio.Load(in, c.SampleRate())
		if err != nil {
			return err
		}
		codes, frames, err := c.Encode(ctx, pcm, q)
		if err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		if *format == "safetensors" {
			shard = append(shard, codec.CodesTensor{Name: names[i], Shape: []int{q, frames}, Data: codes})
			continue
		}
		if lines == nil {
			t, err := runtime.FromSlice(runtime.I32, runtime.Shape{q, frames}, codes)
			if err != nil {
				return err
			}
			if err := writeFile(filepath.Join(*out, names[i]+".npy"), func(w io.Writer) error { return npy.Write(w, t) }); err != nil {
				return err
			}
			continue
		}
		rows := make([][]int32, q)
		for s := range rows {
			rows[s] = codes[s*frames : (s+1)*frames]
		}
		line, err := json.Marshal(map[string]any{"audio": in, "codec": c.Family(), "sample_rate": c.SampleRate(),
			"samples": len(pcm), "frames": frames, "codes": rows})
		if err != nil {
			return err
		}
		if _, err := lines.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	if lines != nil {
		return lines.Flush()
	}
	if shard != nil {
		meta := map[string]string{"codec": c.Family(), "sample_rate": fmt.Sprint(c.SampleRate()), "layout": "codes [Q, T] int32 per input"}
		return writeFile(filepath.Join(*out, "codes.safetensors"), func(w io.Writer) error { return codec.WriteSafetensors(w, shard, meta) })
	}
	return nil
}

// runDetokenize decodes one CODES.npy ([Q, T], int32 or int64) to audio.
func runDetokenize(ctx context.Context, args []string) error {
	fs := newFlags("detokenize", detokenizeUsage)
	codecFlags(fs)
	out := fs.String("out", "", "output WAV file (32-bit float, mono, the codec's rate)")
	name := fs.String("name", "", "tensor to decode from a codes.safetensors shard (default: its only tensor)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, _ := fs.GetString("codec")
	if dir == "" || *out == "" || fs.NArg() != 1 {
		return fmt.Errorf("need --codec DIR, --out FILE and one CODES file: %w", errUsage)
	}
	sh, codes, err := readCodes(fs.Arg(0), *name)
	if err != nil {
		return err
	}
	c, done, err := openCodec(fs, dir)
	if err != nil {
		return err
	}
	defer done()
	pcm, err := c.Decode(ctx, codes, sh[0], sh[1])
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	return writeFile(*out, func(w io.Writer) error { return writeFloatWAV(w, pcm, c.SampleRate()) })
}

// readCodes reads codes [Q, T] from an .npy file (int32 or int64) or one
// tensor of a safetensors shard.
func readCodes(path, name string) ([]int, []int32, error) {
	if filepath.Ext(path) == ".safetensors" {
		ts, err := codec.ReadCodesSafetensors(path)
		if err != nil {
			return nil, nil, err
		}
		if name == "" && len(ts) == 1 {
			for n := range ts {
				name = n
			}
		}
		t, ok := ts[name]
		if !ok {
			return nil, nil, fmt.Errorf("%s has no tensor %q (it has %d; name one with --name)", path, name, len(ts))
		}
		if len(t.Shape) != 2 {
			return nil, nil, fmt.Errorf("%s: tensor %q has shape %v, want codes [Q, T]", path, name, t.Shape)
		}
		return t.Shape, t.Data, nil
	}
	t, err := npy.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	sh := t.Shape()
	if len(sh) != 2 {
		return nil, nil, fmt.Errorf("%s has shape %v, want codes [Q, T]", path, sh)
	}
	switch t.DType() {
	case runtime.I32:
		return sh, t.I32(), nil
	case runtime.I64:
		codes := make([]int32, 0, len(t.I64()))
		for _, v := range t.I64() {
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, nil, fmt.Errorf("%s: code %d out of range", path, v)
			}
			codes = append(codes, int32(v))
		}
		return sh, codes, nil
	}
	return nil, nil, fmt.Errorf("%s is %v, want int32 or int64 codes", path, t.DType())
}

// codecStages is the number of codebooks --bandwidth or --codebooks
// picks (all of c's when both are 0).
func codecStages(c *codec.Codec, bandwidth float64, stages int) (int, error) {
	switch {
	case bandwidth != 0 && stages != 0:
		return 0, fmt.Errorf("give --bandwidth or --codebooks, not both: %w", errUsage)
	case bandwidth != 0:
		return c.StagesForBandwidth(bandwidth)
	case stages != 0:
		if stages < 1 || stages > c.NumStages() {
			return 0, fmt.Errorf("--codebooks %d, want 1..%d (the codec has %d): %w", stages, c.NumStages(), c.NumStages(), errUsage)
		}
		return stages, nil
	}
	return c.NumStages(), nil
}

// openCodec opens codec directory dir with its quantizer on --backend
// and its graphs on --execution-provider (in TF32 only when --cuda-tf32 is
// given); done closes both.
func openCodec(fs *pflag.FlagSet, dir string) (*codec.Codec, func(), error) {
	lib, _ := fs.GetString("ort-lib")
	threads, _ := fs.GetInt("threads")
	name, _ := fs.GetString("backend")
	be, err := runtime.OpenBackend(name)
	if err != nil {
		return nil, nil, fmt.Errorf("--backend %s: %w", name, err)
	}
	provider, _ := fs.GetString("execution-provider")
	ep, _ := fs.GetString("ort-cuda-ep")
	tf32, _ := fs.GetBool("cuda-tf32")
	tf32 = tf32 && fs.Changed("cuda-tf32")
	if provider != onnx.ProviderCPU && provider != onnx.ProviderCUDA {
		_ = be.Close()
		return nil, nil, fmt.Errorf("--execution-provider %q is not %s or %s: %w", provider, onnx.ProviderCPU, onnx.ProviderCUDA, errUsage)
	}
	c, err := codec.Open(dir, codec.Options{Library: lib, Threads: threads, Backend: be, Provider: provider, EPLibrary: ep, TF32: tf32})
	if err != nil {
		_ = be.Close()
		return nil, nil, err
	}
	return c, func() { _ = c.Close(); _ = be.Close() }, nil
}

// writeFloatWAV writes mono IEEE-float (format 3) WAV.
func writeFloatWAV(w io.Writer, pcm []float32, rate int) error {
	data := uint32(4 * len(pcm))
	bw := bufio.NewWriter(w)
	le := binary.LittleEndian
	hdr := make([]byte, 0, 58)
	hdr = append(hdr, "RIFF"...)
	hdr = le.AppendUint32(hdr, 50+data)
	hdr = append(hdr, "WAVEfmt "...)
	hdr = le.AppendUint32(hdr, 18)
	hdr = le.AppendUint16(hdr, 3) // WAVE_FORMAT_IEEE_FLOAT
	hdr = le.AppendUint16(hdr, 1)
	hdr = le.AppendUint32(hdr, uint32(rate))
	hdr = le.AppendUint32(hdr, uint32(rate*4))
	hdr = le.AppendUint16(hdr, 4)
	hdr = le.AppendUint16(hdr, 32)
	hdr = le.AppendUint16(hdr, 0)
	hdr = append(hdr, "fact"...)
	hdr = le.AppendUint32(hdr, 4)
	hdr = le.AppendUint32(hdr, uint32(len(pcm)))
	hdr = append(hdr, "data"...)
	hdr = le.AppendUint32(hdr, data)
	if _, err := bw.Write(hdr); err != nil {
		return err
	}
	var b [4]byte
	for _, v := range pcm {
		le.PutUint32(b[:], math.Float32bits(v))
		if _, err := bw.Write(b[:]); err != nil {
			return err
		}
	}
	return bw.Flush()
}
