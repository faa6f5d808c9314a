// Command peer times edge and sherpa-onnx side by side on the same model
// and clips, in one run: the bundled model re-packed the way sherpa-onnx
// reads a NeMo CTC export (its ONNX metadata gains normalize_type), the
// bundled clips alone and concatenated to about 1 and 10 minutes, warm
// processes, rounds alternating between the two, at each thread count. It
// prints a markdown table of median wall times, their ratio and both WERs
// against the clips' texts.
//
//	go run ./scripts/bench/peer [-threads 1,2] [-rounds 3] [-repeats 3] [-precision int8]
//
// -precision int8 runs the model's int8 encoder (model.int8.onnx) in both.
//
// sherpa-onnx comes from npm (sherpa-onnx-node, which bundles its own ONNX
// Runtime), installed into ~/.cache/edge/sherpa-onnx-node-VERSION on first
// use; node and npm must be on PATH.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/runtime/audio"
	edgemodel "github.com/edgespeech/edge/runtime/model"
)

const sherpaVersion = "1.13.8"

var (
	edgeOpt     asr.Options
	workersFlag string
	edgeOnly    bool
)

type clip struct {
	name, path, text string
	seconds          float64
	pcm              []float32
}

func main() {
	model := flag.String("model", "models/default", "the bundled model directory")
	threadsFlag := flag.String("threads", "1,2", "thread counts")
	rounds := flag.Int("rounds", 3, "rounds, alternating edge and sherpa-onnx")
	repeats := flag.Int("repeats", 3, "decodes of each clip a round")
	flag.Float64Var(&edgeOpt.ChunkSeconds, "chunk-seconds", 0, "edge's chunk length (0 = its default)")
	flag.Float64Var(&edgeOpt.OverlapSeconds, "overlap-seconds", 0, "edge's chunk overlap (0 = its default)")
	flag.StringVar(&workersFlag, "workers", "", "edge's chunk workers (\"\" = its default; \"threads\" = one per thread)")
	flag.BoolVar(&edgeOnly, "edge-only", false, "time edge alone (sweeps of its options)")
	flag.StringVar(&edgeOpt.Precision, "precision", "", "encoder precision in both: fp32 (model.onnx) or int8 (model.int8.onnx)")
	flag.Parse()
	if err := run(*model, *threadsFlag, *rounds, *repeats); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}

func run(model, threadsFlag string, rounds, repeats int) error {
	var sherpaDir string
	var err error
	if !edgeOnly {
		if sherpaDir, err = installSherpa(); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "edge-peer")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	repacked, err := repack(model, edgeOpt.Precision, filepath.Join(tmp, "sherpa-model"))
	if err != nil {
		return err
	}
	clips, err := makeClips(filepath.Join(model, "testdata"), tmp)
	if err != nil {
		return err
	}
	var paths []string
	for _, c := range clips {
		paths = append(paths, c.path)
	}
	fmt.Printf("| clip | threads | edge ms | sherpa-onnx %s ms | sherpa / edge | edge CPU ms | sherpa-onnx CPU ms | CPU sherpa / edge | edge WER | sherpa-onnx WER |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n", sherpaVersion)
	for _, f := range strings.Split(threadsFlag, ",") {
		threads, err := strconv.Atoi(f)
		if err != nil || threads < 1 {
			return fmt.Errorf("-threads %q: want counts like 1,2", threadsFlag)
		}
		opt := edgeOpt
		opt.Threads = threads
		switch workersFlag {
		case "":
		case "threads":
			opt.Workers = threads
		default:
			if opt.Workers, err = strconv.Atoi(workersFlag); err != nil {
				return fmt.Errorf("-workers %q: want a count or \"threads\"", workersFlag)
			}
		}
		rec, err := asr.Open(model, opt)
		if err != nil {
			return err
		}
		edgeMS := make([][]float64, len(clips))
		sherpaMS := make([][]float64, len(clips))
		edgeCPU := make([][]float64, len(clips))
		sherpaCPU := make([][]float64, len(clips))
		edgeText := make([]string, len(clips))
		sherpaText := make([]string, len(clips))
		for i, c := range clips { // warm-up
			if _, err := rec.Transcribe(context.Background(), c.pcm); err != nil {
				return fmt.Errorf("edge on %s: %w", clips[i].name, err)
			}
		}
		for range rounds {
			for i, c := range clips {
				for range repeats {
					t0, c0 := time.Now(), cpuTime()
					tr, err := rec.Transcribe(context.Background(), c.pcm)
					if err != nil {
						return err
					}
					edgeMS[i] = append(edgeMS[i], float64(time.Since(t0).Microseconds())/1000)
					edgeCPU[i] = append(edgeCPU[i], float64((cpuTime()-c0).Microseconds())/1000)
					edgeText[i] = tr.Text
				}
			}
			if edgeOnly {
				continue
			}
			res, err := runSherpa(sherpaDir, repacked, threads, repeats, paths)
			if err != nil {
				return err
			}
			for i := range clips {
				sherpaMS[i] = append(sherpaMS[i], res[i].MS...)
				sherpaCPU[i] = append(sherpaCPU[i], res[i].CPU...)
				sherpaText[i] = res[i].Text
			}
		}
		_ = rec.Close()
		for i, c := range clips {
			e, s := median(edgeMS[i]), median(sherpaMS[i])
			ec, sc := median(edgeCPU[i]), median(sherpaCPU[i])
			fmt.Printf("| %s (%.1f s) | %d | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx | %.1f %% | %.1f %% |\n", c.name, c.seconds, threads, e, s, s/e, ec, sc, sc/ec,
				100*wer(c.text, edgeText[i]), 100*wer(c.text, sherpaText[i]))
		}
	}
	return nil
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// installSherpa npm-installs sherpa-onnx-node into the cache once.
func installSherpa() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "edge", "sherpa-onnx-node-"+sherpaVersion)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "sherpa-onnx-node")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "peer: npm install sherpa-onnx-node@%s into %s\n", sherpaVersion, dir)
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", dir, "sherpa-onnx-node@"+sherpaVersion)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm install sherpa-onnx-node@%s: %w", sherpaVersion, err)
	}
	return dir, nil
}

// cpuTime is the process's user + system time so far (every thread).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type sherpaResult struct {
	File string    `json:"file"`
	MS   []float64 `json:"ms"`
	CPU  []float64 `json:"cpu_ms"`
	Text string    `json:"text"`
}

func runSherpa(dir, model string, threads, repeats int, files []string) ([]sherpaResult, error) {
	script, err := filepath.Abs("scripts/bench/peer/sherpa.mjs")
	if err != nil {
		return nil, err
	}
	args := append([]string{script, model, strconv.Itoa(threads), strconv.Itoa(repeats)}, files...)
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(dir, "node_modules", "sherpa-onnx-linux-x64"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("sherpa-onnx: %w", err)
	}
	var res []sherpaResult
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r sherpaResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("sherpa-onnx output %q: %w", sc.Text(), err)
		}
		res = append(res, r)
	}
	if len(res) != len(files) {
		return nil, fmt.Errorf("sherpa-onnx gave %d results for %d files", len(res), len(files))
	}
	return res, nil
}

// repack copies the model for sherpa-onnx: its encoder of the given
// precision (model.Manifest.UsePrecision) as model.onnx with the metadata
// entry normalize_type=per_feature appended (ModelProto.metadata_props is
// field 14, a repeated StringStringEntryProto; appending a field to a
// serialized protobuf message adds it), and tokens.txt as it is.
func repack(dir, precision, dst string) (string, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	m, err := edgemodel.Load(dir)
	if err != nil {
		return "", err
	}
	if err := m.UsePrecision(precision); err != nil {
		return "", err
	}
	onnx, err := os.ReadFile(m.EncoderPath())
	if err != nil {
		return "", err
	}
	entry := appendBytes(appendBytes(nil, 1, []byte("normalize_type")), 2, []byte("per_feature"))
	onnx = appendBytes(onnx, 14, entry)
	if err := os.WriteFile(filepath.Join(dst, "model.onnx"), onnx, 0o644); err != nil {
		return "", err
	}
	tokens, err := os.ReadFile(filepath.Join(dir, "tokens.txt"))
	if err != nil {
		return "", err
	}
	return dst, os.WriteFile(filepath.Join(dst, "tokens.txt"), tokens, 0o644)
}

// appendBytes appends protobuf field f (wire type 2) holding b.
func appendBytes(dst []byte, f int, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(f<<3|2))
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// makeClips is the shortest bundled clip alone, and all of them with 0.3 s
// pauses repeated to about 1 and 10 minutes, as 16-bit WAV files in dir.
func makeClips(testdata, dir string) ([]clip, error) {
	names := []string{"words_1", "demo", "words_2", "words_3", "words_4"}
	var all []float32
	var texts []string
	var first clip
	for i, n := range names {
		pcm, err := audio.Load(filepath.Join(testdata, n+".wav"), 16000)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(filepath.Join(testdata, n+".json"))
		if err != nil {
			return nil, err
		}
		var truth struct{ Text string }
		if err := json.Unmarshal(b, &truth); err != nil {
			return nil, err
		}
		if i == 0 {
			first = clip{name: n, text: truth.Text, pcm: pcm}
		}
		all = append(append(all, pcm...), make([]float32, 4800)...)
		texts = append(texts, truth.Text)
	}
	clips := []clip{first}
	for _, target := range []struct {
		name    string
		seconds float64
	}{{"1 min", 58}, {"10 min", 585}} {
		c := clip{name: target.name}
		var ts []string
		for float64(len(c.pcm))/16000 < target.seconds {
			c.pcm = append(c.pcm, all...)
			ts = append(ts, texts...)
		}
		c.text = strings.Join(ts, " ")
		clips = append(clips, c)
	}
	for i := range clips {
		c := &clips[i]
		c.seconds = float64(len(c.pcm)) / 16000
		c.path = filepath.Join(dir, strings.ReplaceAll(c.name, " ", "")+".wav")
		if err := os.WriteFile(c.path, wav16(c.pcm), 0o644); err != nil {
			return nil, err
		}
	}
	return clips, nil
}

// wav16 encodes mono 16 kHz PCM as a 16-bit WAV file.
func wav16(pcm []float32) []byte {
	n := 2 * len(pcm)
	b := make([]byte, 0, 44+n)
	b = append(b, "RIFF"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(36+n))
	b = append(b, "WAVEfmt "...)
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint32(b, 16000)
	b = binary.LittleEndian.AppendUint32(b, 32000)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	for _, v := range pcm {
		b = binary.LittleEndian.AppendUint16(b, uint16(int16(math.Round(math.Max(-1, math.Min(1, float64(v)))*32767))))
	}
	return b
}

// wer is the word error rate of hyp against ref (word-level edit distance
// over the reference's word count).
func wer(ref, hyp string) float64 {
	r, h := strings.Fields(ref), strings.Fields(hyp)
	prev := make([]int, len(h)+1)
	cur := make([]int, len(h)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(r); i++ {
		cur[0] = i
		for j := 1; j <= len(h); j++ {
			sub := prev[j-1]
			if r[i-1] != h[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return float64(prev[len(h)]) / float64(max(1, len(r)))
}
