package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Formats Detect recognises (Manifest.Format).
const (
	FormatManifest = "model.yaml"
	FormatSherpa   = "sherpa-onnx NeMo CTC"
	FormatNeMo     = "NeMo ONNX export"
	FormatHFW2V    = "Hugging Face wav2vec2-style CTC"
	FormatHFPara   = "Hugging Face ParakeetForCTC"
)

// Detect builds the manifest of a model directory that has no model.yaml
// from the files its ecosystem ships (see README "Bring your own model"):
//
//   - Hugging Face: config.json whose architectures (or model_type) is a
//     CTC model edge runs, with processor_config.json or
//     preprocessor_config.json, vocab.json or tokenizer.json, and
//     model.onnx or onnx/model.onnx;
//   - NeMo's own export: model_config.yaml (or a .nemo archive holding it)
//     and one .onnx file, the tokenizer from the config's tokenizer section
//     (a SentencePiece .model) or its decoder.vocabulary;
//   - sherpa-onnx NeMo CTC: tokens.txt and model.onnx or model.int8.onnx
//     with sherpa-onnx's custom metadata.
//
// A directory that fits two of them, or none, is an error naming the files
// seen. A value the frontend cannot reproduce is an error naming the file,
// the key and the value. Manifest.Sources says where each value came from.
func Detect(dir string) (*Manifest, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("model directory: %w", err)
	}
	has := map[string]bool{}
	var names []string
	for _, e := range entries {
		has[e.Name()] = true
		names = append(names, e.Name())
	}
	d := &detector{dir: dir, has: has, names: names}
	var found []string
	if has["config.json"] {
		found = append(found, "Hugging Face (config.json)")
	}
	if has["model_config.yaml"] || d.nemoArchive() != "" {
		found = append(found, "NeMo (model_config.yaml or .nemo)")
	}
	if has["tokens.txt"] {
		found = append(found, "sherpa-onnx (tokens.txt)")
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%s: no %s and no model export edge recognises (want a Hugging Face CTC export with config.json, "+
			"a NeMo export with model_config.yaml or a .nemo archive, or a sherpa-onnx NeMo CTC model with tokens.txt); files seen: %s",
			dir, FileName, listNames(names))
	case 1:
	default:
		return nil, fmt.Errorf("%s is ambiguous: it holds the files of %s; write a %s naming the encoder and vocabulary (edge models inspect shows each reading)",
			dir, strings.Join(found, " and "), FileName)
	}
	m := &Manifest{Dir: dir, Sources: map[string]string{}, Normalize: NormalizeNone}
	d.m = m
	switch {
	case has["config.json"]:
		err = d.huggingFace()
	case has["tokens.txt"]:
		err = d.sherpa()
	default:
		err = d.nemo()
	}
	if err != nil {
		return nil, err
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%s (%s): the detected manifest is invalid: %w", dir, m.Format, err)
	}
	if err := m.loadFiles(); err != nil {
		return nil, fmt.Errorf("%s (%s): %w", dir, m.Format, err)
	}
	return m, nil
}

func listNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) > 20 {
		return strings.Join(names[:20], ", ") + fmt.Sprintf(", ... (%d in all)", len(names))
	}
	return strings.Join(names, ", ")
}

type detector struct {
	dir   string
	has   map[string]bool
	names []string
	m     *Manifest
	onnx  *ONNXInfo
}

func (d *detector) set(key, source string) { d.m.Sources[key] = source }

// language takes a config's language value when it names one language: a
// code such as "en" or a one-element list of one; several languages, or a
// value that is not a code, leave the manifest's language unknown (noted).
func (d *detector) language(v any, source string) {
	if l, ok := v.([]any); ok && len(l) == 1 {
		v = l[0]
	}
	switch x := v.(type) {
	case nil:
		return
	case string:
		if c := strings.ToLower(strings.TrimSpace(x)); languageCode(c) {
			d.m.Language = c
			d.set("language", source)
			return
		}
	}
	d.m.Notes = append(d.m.Notes, fmt.Sprintf("%s %v is not one ISO-639 code: the model's language is left unknown", source, v))
}

func (d *detector) path(name string) string { return filepath.Join(d.dir, name) }

func (d *detector) nemoArchive() string {
	for _, n := range d.names {
		if strings.HasSuffix(strings.ToLower(n), ".nemo") {
			return n
		}
	}
	return ""
}

// pickONNX chooses the encoder among candidates (relative paths, in order
// of preference) and reads its interface.
func (d *detector) pickONNX(candidates ...string) error {
	var found []string
	for _, c := range candidates {
		if fileExists(d.path(c)) {
			found = append(found, c)
		}
	}
	note := ""
	if len(found) == 0 {
		// Any single .onnx file at the top or under onnx/.
		var all []string
		for _, sub := range []string{"", "onnx"} {
			entries, _ := os.ReadDir(d.path(sub))
			for _, e := range entries {
				if !e.IsDir() && strings.HasSuffix(strings.ToLower(e.Name()), ".onnx") {
					all = append(all, filepath.Join(sub, e.Name()))
				}
			}
		}
		switch len(all) {
		case 0:
			return fmt.Errorf("%s: no ONNX encoder (want %s)", d.dir, strings.Join(candidates, " or "))
		case 1:
			found = all
		default:
			return fmt.Errorf("%s: cannot tell which ONNX file is the encoder: %s (none is named %s); write a %s with encoder.file",
				d.dir, strings.Join(all, ", "), strings.Join(candidates, " or "), FileName)
		}
	} else if len(found) > 1 {
		note = fmt.Sprintf(" (preferred to %s; set encoder.file in a %s to use another)", strings.Join(found[1:], ", "), FileName)
	}
	info, err := ReadONNX(d.path(found[0]))
	if err != nil {
		return err
	}
	for _, loc := range info.ExternalData {
		p := filepath.Join(filepath.Dir(d.path(found[0])), loc)
		if !fileExists(p) {
			return fmt.Errorf("%s keeps its weights in the external data file %s, which is missing (download it next to the .onnx file)", d.path(found[0]), p)
		}
	}
	d.onnx = info
	if len(info.ExternalData) > 0 {
		d.m.Notes = append(d.m.Notes, fmt.Sprintf("%s keeps its weights in %s beside it", found[0], strings.Join(info.ExternalData, ", ")))
	}
	if info.QuantOps > 0 {
		d.m.Notes = append(d.m.Notes, fmt.Sprintf("%s is a quantised graph (%d quantisation operators): it runs as it is", found[0], info.QuantOps))
	}
	for _, t := range append(append([]TensorInfo{}, info.Inputs...), info.Outputs...) {
		if t.Elem == ElemFloat16 {
			d.m.Notes = append(d.m.Notes, fmt.Sprintf("%s is a float16 graph: edge casts its input and output at the boundary", found[0]))
			break
		}
	}
	d.m.Encoder.File = found[0]
	d.set("encoder.file", "the ONNX file found"+note)
	return nil
}

// mapIO maps the ONNX inputs and outputs to edge names by type and rank:
// one float input of rank 3 (features) or 2 (pcm), integer inputs of rank 1
// (lengths) and 2 (attention_mask), one float output of rank 3 (log_probs
// when logProbs says the model applies log-softmax, else logits) and an
// optional integer output of rank 1 (lengths).
func (d *detector) mapIO(logProbs func(name string) bool) error {
	info := d.onnx
	in, out := map[string]string{}, map[string]string{}
	put := func(dst map[string]string, key string, t TensorInfo) error {
		if prev, dup := dst[key]; dup {
			return fmt.Errorf("%s: both %q and %q look like the encoder's %s; write a %s naming them (inputs: %s; outputs: %s)",
				info.Path, prev, t.Name, key, FileName, tensorList(info.Inputs), tensorList(info.Outputs))
		}
		dst[key] = t.Name
		return nil
	}
	isFloat := func(t TensorInfo) bool { return t.Elem == ElemFloat || t.Elem == ElemFloat16 }
	for _, t := range info.Inputs {
		var key string
		switch r := len(t.Dims); {
		case isFloat(t) && r == 3:
			key = InputFeatures
		case isFloat(t) && r == 2:
			key = InputPCM
		case !isFloat(t) && r == 1:
			key = InputLengths
		case !isFloat(t) && r == 2:
			key = InputAttentionMask
		default:
			return fmt.Errorf("%s: input %s fits no encoder input (want float features [B,F,T], pcm [B,N], integer lengths [B] or mask [B,T])", info.Path, t)
		}
		if err := put(in, key, t); err != nil {
			return err
		}
	}
	for _, t := range info.Outputs {
		switch r := len(t.Dims); {
		case isFloat(t) && r == 3:
			key := OutputLogits
			if logProbs(t.Name) {
				key = OutputLogProbs
			}
			if err := put(out, "scores", t); err != nil {
				return err
			}
			out[key] = t.Name
		case !isFloat(t) && r == 1:
			if err := put(out, OutputLengths, t); err != nil {
				return err
			}
		}
	}
	delete(out, "scores")
	d.m.Encoder.Inputs, d.m.Encoder.Outputs = in, out
	src := "the declared inputs/outputs of " + d.m.Encoder.File + " (by element type and rank)"
	d.set("encoder.inputs", src)
	d.set("encoder.outputs", src)
	return nil
}

func tensorList(ts []TensorInfo) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return strings.Join(parts, ", ")
}

// featureDims returns the ONNX features input's declared dims, or nil.
func (d *detector) featureDims() []int64 {
	name := d.m.Encoder.Inputs[InputFeatures]
	for _, t := range d.onnx.Inputs {
		if t.Name == name {
			return t.Dims
		}
	}
	return nil
}

// layout picks the features layout from the input's fixed mel axis, else def.
func (d *detector) layout(mels int, def string) (string, error) {
	dims := d.featureDims()
	if len(dims) != 3 {
		return def, nil
	}
	switch {
	case dims[1] == int64(mels):
		return LayoutMelTime, nil
	case dims[2] == int64(mels):
		return LayoutTimeMel, nil
	case dims[1] > 0 || dims[2] > 0:
		return "", fmt.Errorf("%s: the features input %s has no axis of %d mels, the frontend's feature size",
			d.onnx.Path, d.m.Encoder.Inputs[InputFeatures], mels)
	}
	return def, nil
}

// outputClasses is the scores output's fixed V, or 0.
func (d *detector) outputClasses() int {
	name := d.m.Encoder.Outputs[OutputLogProbs]
	if name == "" {
		name = d.m.Encoder.Outputs[OutputLogits]
	}
	for _, t := range d.onnx.Outputs {
		if t.Name == name && len(t.Dims) == 3 && t.Dims[2] > 0 {
			return int(t.Dims[2])
		}
	}
	return 0
}

// parakeetFrontend sets the fbank parameters of a NeMo/Parakeet log-mel
// frontend: the parakeet-80/128 preset and overrides for what differs.
func (d *detector) parakeetFrontend(p frontendParams, layout string, src string) {
	preset := "parakeet-128"
	if p.mels == 80 {
		preset = "parakeet-80"
	}
	fe := map[string]any{"preset": preset, "layout": layout}
	d.set("frontend.preset", src+" (a NeMo >= 2.5 / HF ParakeetFeatureExtractor log-mel frontend of "+strconv.Itoa(p.mels)+" mels)")
	d.set("frontend.layout", "the features input's axes in "+d.m.Encoder.File)
	if p.mels != 80 && p.mels != 128 {
		fe["num_mels"] = p.mels
		d.set("frontend.num_mels", src)
	}
	if p.sampleRate != 16000 {
		fe["sample_rate"] = p.sampleRate
		fe["f_max"] = float64(p.sampleRate) / 2
		d.set("frontend.sample_rate", src)
		d.set("frontend.f_max", src+" (half the sample rate)")
	}
	for _, o := range []struct {
		key       string
		val, base int
	}{{"n_fft", p.nfft, 512}, {"win_length", p.win, 400}, {"hop_length", p.hop, 160}} {
		if o.val != o.base {
			fe[o.key] = o.val
			d.set("frontend."+o.key, src)
		}
	}
	if p.preemph != 0.97 {
		fe["pre_emphasis"] = p.preemph
		d.set("frontend.pre_emphasis", src)
	}
	if p.normalize != "per_feature" {
		fe["normalize"] = p.normalize
		d.set("frontend.normalize", src)
	}
	d.m.Frontend = fe
	d.m.SampleRate = p.sampleRate
	d.set("sample_rate", src)
}

type frontendParams struct {
	sampleRate, mels, nfft, win, hop int
	preemph                          float64
	normalize                        string // per_feature or none
}

// wordRule sets the word boundaries from the vocabulary's symbols.
func (d *detector) wordRule(v *Vocabulary, src string) error {
	_, bar := v.ID("|")
	_, marker := v.ID(SentencePieceMarker)
	chars, marked := true, false
	for _, s := range v.Tokens() {
		if IsSpecialToken(s) {
			continue
		}
		if strings.HasPrefix(s, SentencePieceMarker) && s != SentencePieceMarker {
			marked = true
		}
		if len([]rune(s)) != 1 {
			chars = false
		}
	}
	_, space := v.ID(" ")
	switch {
	case bar && chars:
		d.m.WordDelimiter = "|"
	case marker && chars:
		d.m.WordDelimiter = SentencePieceMarker
	case marked:
		d.m.SentencePieceMarker = SentencePieceMarker
		d.set("sentencepiece_marker", src+" (pieces starting with \u2581 start words)")
		return nil
	case space && chars:
		d.m.WordDelimiter = " "
	default:
		return fmt.Errorf("%s: cannot tell where words end: the vocabulary has no \"|\", \"\u2581\" or space token and no \u2581-prefixed pieces; write a %s with word_delimiter", src, FileName)
	}
	d.set("word_delimiter", src+" (a character vocabulary with this delimiter token)")
	return nil
}

// ---------------------------------------------------------------- sherpa-onnx

func (d *detector) sherpa() error {
	m := d.m
	m.Format = FormatSherpa
	if err := d.pickONNX("model.onnx", "model.int8.onnx"); err != nil {
		return err
	}
	md := d.onnx.Metadata
	onnxName := m.Encoder.File
	if err := d.mapIO(func(string) bool { return true }); err != nil {
		return err
	}
	if _, ok := m.Encoder.Inputs[InputFeatures]; !ok {
		return fmt.Errorf("%s: a sherpa-onnx NeMo CTC model takes features (audio_signal [B, n_mels, T]); this one's inputs are %s", d.onnx.Path, tensorList(d.onnx.Inputs))
	}
	m.Vocabulary = "tokens.txt"
	d.set("vocabulary", "tokens.txt")
	v, err := LoadVocabularyFile(d.path("tokens.txt"))
	if err != nil {
		return err
	}
	blank := -1
	for _, s := range []string{"<blk>", "<blank>", "<eps>"} {
		if id, ok := v.ID(s); ok {
			blank = id
			d.set("blank_id", fmt.Sprintf("tokens.txt: the id of %s", s))
			break
		}
	}
	if blank < 0 {
		return fmt.Errorf("%s: tokens.txt has no blank token (<blk>, <blank> or <eps>): sherpa-onnx finds the CTC blank by name", d.dir)
	}
	m.BlankID = blank
	if s, ok := md["vocab_size"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n != v.Len() {
			return fmt.Errorf("%s: custom metadata vocab_size=%q, but tokens.txt has %d tokens", d.onnx.Path, s, v.Len())
		}
	}
	mels := 0
	if s, ok := md["feat_dim"]; ok {
		if mels, err = strconv.Atoi(s); err != nil || mels <= 0 || mels > 4096 {
			return fmt.Errorf("%s: custom metadata feat_dim=%q is not a number of mel bins", d.onnx.Path, s)
		}
	} else if dims := d.featureDims(); len(dims) == 3 && dims[1] > 0 {
		mels = int(dims[1])
	} else {
		return fmt.Errorf("%s: the number of mel bins is unknown: no custom metadata feat_dim and the features input %s has no fixed mel axis",
			d.onnx.Path, m.Encoder.Inputs[InputFeatures])
	}
	normalize := "per_feature"
	switch nt, ok := md["normalize_type"]; {
	case !ok:
		return fmt.Errorf("%s: custom metadata normalize_type is missing (sherpa-onnx needs it: per_feature, or empty for none)", d.onnx.Path)
	case nt == "per_feature":
	case nt == "":
		normalize = "none"
	default:
		return fmt.Errorf("%s: custom metadata normalize_type=%q: the fbank op reproduces per_feature and none (empty), not %q", d.onnx.Path, nt, nt)
	}
	sub, err := strconv.Atoi(md["subsampling_factor"])
	if err != nil || sub <= 0 || sub > 1024 {
		return fmt.Errorf("%s: custom metadata subsampling_factor=%q: want the encoder's time subsampling (8 for FastConformer)", d.onnx.Path, md["subsampling_factor"])
	}
	layout, err := d.layout(mels, LayoutMelTime)
	if err != nil {
		return err
	}
	sr := 16000
	if s, ok := md["sample_rate"]; ok {
		if sr, err = strconv.Atoi(s); err != nil || sr <= 0 {
			return fmt.Errorf("%s: custom metadata sample_rate=%q is not a rate in Hz", d.onnx.Path, s)
		}
	}
	metaSrc := onnxName + " custom metadata feat_dim/normalize_type"
	d.parakeetFrontend(frontendParams{sampleRate: sr, mels: mels, nfft: 512, win: 400, hop: 160, preemph: 0.97, normalize: normalize}, layout, metaSrc)
	if _, ok := md["sample_rate"]; !ok {
		d.set("sample_rate", "sherpa-onnx's NeMo CTC models run at 16000 Hz (no sample_rate metadata)")
	}
	m.FrameStride = float64(sub*160) / float64(sr)
	d.set("frame_stride", fmt.Sprintf("%s custom metadata subsampling_factor=%d x hop 160 samples", onnxName, sub))
	m.Name = "sherpa-onnx-" + firstNonEmpty(md["model_type"], "nemo-ctc")
	d.set("name", onnxName+" custom metadata model_type")
	if d.has["bpe.model"] || d.has["tokenizer.model"] {
		m.Tokenizer = map[bool]string{true: "bpe.model", false: "tokenizer.model"}[d.has["bpe.model"]]
		d.set("tokenizer", m.Tokenizer)
	}
	return d.wordRule(v, "tokens.txt")
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// ---------------------------------------------------------------- NeMo

// nemoConfig is the part of a NeMo model_config.yaml edge reads.
type nemoConfig struct {
	SampleRate   int            `yaml:"sample_rate"`
	Preprocessor map[string]any `yaml:"preprocessor"`
	Encoder      map[string]any `yaml:"encoder"`
	Decoder      struct {
		NumClasses int      `yaml:"num_classes"`
		Vocabulary []string `yaml:"vocabulary"`
	} `yaml:"decoder"`
	Tokenizer *struct {
		Type      string `yaml:"type"`
		ModelPath string `yaml:"model_path"`
		VocabPath string `yaml:"vocab_path"`
	} `yaml:"tokenizer"`
	Target string `yaml:"target"`
	// Language is stated by some exports; edge reads a single code.
	Language any `yaml:"language"`
}

func readNeMoConfig(path string) (*nemoConfig, error) {
	b, err := readLimited(path, 16<<20)
	if err != nil {
		return nil, err
	}
	var c nemoConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: YAML: %w", path, err)
	}
	return &c, nil
}

func (d *detector) nemo() error {
	m := d.m
	m.Format = FormatNeMo
	cfgName := "model_config.yaml"
	if !d.has[cfgName] {
		arch := d.nemoArchive()
		names, err := archiveMembers(d.path(arch))
		if err != nil {
			return err
		}
		if !slices.Contains(names, cfgName) {
			return fmt.Errorf("%s has no model_config.yaml: is it a NeMo model archive?", d.path(arch))
		}
		cfgName = arch + ArchiveSep + cfgName
	}
	cfgPath := d.path(cfgName)
	cfg, err := readNeMoConfig(cfgPath)
	if err != nil {
		return err
	}
	if err := d.pickONNX("model.onnx"); err != nil {
		return err
	}
	if err := d.mapIO(func(name string) bool {
		l := strings.ToLower(name)
		return strings.Contains(l, "log") && strings.Contains(l, "prob")
	}); err != nil {
		return err
	}
	if _, ok := m.Encoder.Inputs[InputFeatures]; !ok {
		return fmt.Errorf("%s: a NeMo CTC export takes features (audio_signal [B, n_mels, T]); this one's inputs are %s", d.onnx.Path, tensorList(d.onnx.Inputs))
	}
	p, err := nemoPreprocessor(cfg.Preprocessor, cfgName)
	if err != nil {
		return err
	}
	layout, err := d.layout(p.mels, LayoutMelTime)
	if err != nil {
		return err
	}
	d.parakeetFrontend(p, layout, cfgName+" preprocessor")
	sub, err := intKey(cfg.Encoder, "subsampling_factor")
	if err != nil || sub <= 0 {
		return fmt.Errorf("%s: encoder.subsampling_factor: %v (want the encoder's time subsampling, e.g. 8)", cfgName, orMissing(err, cfg.Encoder["subsampling_factor"]))
	}
	m.FrameStride = float64(sub*p.hop) / float64(p.sampleRate)
	d.set("frame_stride", fmt.Sprintf("%s encoder.subsampling_factor=%d x preprocessor window_stride (%d samples)", cfgName, sub, p.hop))
	m.Name = "nemo-" + strings.TrimSuffix(firstNonEmpty(lastDot(cfg.Target), "ctc"), "Model")
	d.set("name", cfgName+" target")
	d.language(cfg.Language, cfgName+" language")
	// Vocabulary: the tokenizer's pieces, or decoder.vocabulary; the blank follows them.
	var v *Vocabulary
	if tk := cfg.Tokenizer; tk != nil && tk.ModelPath != "" {
		if tk.Type != "" && tk.Type != "bpe" {
			return fmt.Errorf("%s: tokenizer.type %q: edge reads SentencePiece tokenizers (type bpe), not %q", cfgName, tk.Type, tk.Type)
		}
		file, err := d.nemoFile(strings.TrimPrefix(tk.ModelPath, "nemo:"), "tokenizer.model")
		if err != nil {
			return fmt.Errorf("%s: tokenizer.model_path %s: %w", cfgName, tk.ModelPath, err)
		}
		m.Vocabulary, m.Tokenizer = file, file
		d.set("vocabulary", cfgName+" tokenizer.model_path (the SentencePiece model's pieces)")
		d.set("tokenizer", cfgName+" tokenizer.model_path")
		if v, err = LoadVocabularyFile(d.path(file)); err != nil {
			return err
		}
	} else if len(cfg.Decoder.Vocabulary) > 0 {
		m.Vocabulary = cfgName
		d.set("vocabulary", cfgName+" decoder.vocabulary")
		if v, err = NewVocabulary(cfg.Decoder.Vocabulary); err != nil {
			return fmt.Errorf("%s: decoder.vocabulary: %w", cfgName, err)
		}
	} else {
		return fmt.Errorf("%s: neither tokenizer.model_path nor decoder.vocabulary: cannot tell the model's tokens", cfgName)
	}
	if n := cfg.Decoder.NumClasses; n > 0 && n != v.Len() {
		return fmt.Errorf("%s: decoder.num_classes=%d, but the vocabulary %s has %d tokens", cfgName, n, m.Vocabulary, v.Len())
	}
	m.BlankID = v.Len()
	d.set("blank_id", "NeMo's CTC blank follows the vocabulary's tokens (id = their count)")
	if V := d.outputClasses(); V > 0 && V != v.Len()+1 {
		return fmt.Errorf("%s: the model emits %d classes; the vocabulary %s has %d tokens + blank", d.onnx.Path, V, m.Vocabulary, v.Len())
	}
	return d.wordRule(v, m.Vocabulary)
}

func lastDot(s string) string {
	if i := strings.LastIndex(s, "."); i >= 0 {
		return s[i+1:]
	}
	return s
}

func orMissing(err error, v any) any {
	if v == nil {
		return "missing"
	}
	if err != nil {
		return err
	}
	return v
}

// nemoFile finds a file of the .nemo archive: extracted into the directory
// (as named, or any *suffix), else inside the archive.
func (d *detector) nemoFile(name, suffix string) (string, error) {
	if name != "" && d.has[name] {
		return name, nil
	}
	var cands []string
	for _, n := range d.names {
		if strings.HasSuffix(n, suffix) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 1 {
		return cands[0], nil
	}
	if arch := d.nemoArchive(); arch != "" {
		members, err := archiveMembers(d.path(arch))
		if err != nil {
			return "", err
		}
		for _, n := range members {
			if n == name || (name == "" && strings.HasSuffix(n, suffix)) {
				return arch + ArchiveSep + n, nil
			}
		}
	}
	if len(cands) > 1 {
		return "", fmt.Errorf("several files end in %s: %s", suffix, strings.Join(cands, ", "))
	}
	return "", fmt.Errorf("%s is not in %s (extract it from the .nemo archive: tar xf MODEL.nemo)", firstNonEmpty(name, "*"+suffix), d.dir)
}

// nemoPreprocessor checks an AudioToMelSpectrogramPreprocessor section
// against what the fbank op reproduces and returns its parameters.
func nemoPreprocessor(p map[string]any, file string) (frontendParams, error) {
	bad := func(key string, v any, want string) error {
		return fmt.Errorf("%s: preprocessor.%s = %v: the fbank op reproduces %s", file, key, v, want)
	}
	if p == nil {
		return frontendParams{}, fmt.Errorf("%s: no preprocessor section", file)
	}
	if t, _ := p["_target_"].(string); t != "" && !strings.HasSuffix(t, "AudioToMelSpectrogramPreprocessor") {
		return frontendParams{}, bad("_target_", t, "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor only")
	}
	out := frontendParams{sampleRate: 16000, mels: 64, preemph: 0.97, normalize: "per_feature"}
	var err error
	if _, ok := p["sample_rate"]; ok {
		if out.sampleRate, err = intKey(p, "sample_rate"); err != nil || out.sampleRate <= 0 {
			return out, bad("sample_rate", p["sample_rate"], "a rate in Hz")
		}
	}
	seconds := func(key string, def float64) (int, error) {
		v := def
		if x, ok := p[key]; ok {
			f, ok := toFloat(x)
			if !ok {
				return 0, bad(key, x, "a duration in seconds")
			}
			v = f
		}
		n := v * float64(out.sampleRate)
		if math.Abs(n-math.Round(n)) > 1e-6 || n < 1 {
			return 0, bad(key, v, "durations of a whole number of samples")
		}
		return int(math.Round(n)), nil
	}
	if out.win, err = seconds("window_size", 0.02); err != nil {
		return out, err
	}
	if out.hop, err = seconds("window_stride", 0.01); err != nil {
		return out, err
	}
	if _, ok := p["features"]; ok {
		if out.mels, err = intKey(p, "features"); err != nil || out.mels <= 0 || out.mels > 4096 {
			return out, bad("features", p["features"], "1..4096 mel bins")
		}
	}
	out.nfft = 1
	for out.nfft < out.win {
		out.nfft *= 2
	}
	if x, ok := p["n_fft"]; ok && x != nil {
		if out.nfft, err = intKey(p, "n_fft"); err != nil || out.nfft < out.win {
			return out, bad("n_fft", x, "n_fft >= the window length")
		}
	}
	if x, ok := p["preemph"]; ok {
		f, ok := toFloat(x)
		if x == nil {
			f, ok = 0, true
		}
		if !ok || f < 0 || f >= 1 {
			return out, bad("preemph", x, "0 <= preemph < 1 (or null)")
		}
		out.preemph = f
	}
	for key, want := range map[string][]any{
		"window":               {"hann"},
		"normalize":            {"per_feature", "none", nil},
		"log":                  {true},
		"mag_power":            {2.0, 2},
		"frame_splicing":       {1},
		"mel_norm":             {"slaney"},
		"log_zero_guard_type":  {"add"},
		"exact_pad":            {false},
		"stft_exact_pad":       {false},
		"stft_conv":            {false},
		"nb_augmentation_prob": {0, 0.0},
		"lowfreq":              {0, 0.0},
	} {
		x, ok := p[key]
		if !ok {
			continue
		}
		if !slices.ContainsFunc(want, func(w any) bool { return equalish(w, x) }) {
			return out, bad(key, x, fmt.Sprint(want))
		}
	}
	if x, ok := p["normalize"]; ok && (x == nil || x == "none") {
		out.normalize = "none"
	}
	if x, ok := p["log_zero_guard_value"]; ok {
		if f, ok := toFloat(x); !ok || math.Abs(f-1.0/(1<<24)) > 1e-12 {
			return out, bad("log_zero_guard_value", x, "2^-24 (NeMo's default)")
		}
	}
	if x, ok := p["highfreq"]; ok && x != nil {
		if f, ok := toFloat(x); !ok || f != float64(out.sampleRate)/2 {
			return out, bad("highfreq", x, "null or half the sample rate")
		}
	}
	return out, nil
}

func equalish(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	return a == b
}

func toFloat(x any) (float64, bool) {
	switch v := x.(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

func intKey(m map[string]any, key string) (int, error) {
	x, ok := m[key]
	if !ok {
		return 0, errors.New("missing")
	}
	f, ok := toFloat(x)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		return 0, fmt.Errorf("%v is not an integer", x)
	}
	return int(f), nil
}

// ---------------------------------------------------------------- Hugging Face

// hfConfig is the part of config.json edge reads.
type hfConfig struct {
	Architectures []string `json:"architectures"`
	ModelType     string   `json:"model_type"`
	VocabSize     int      `json:"vocab_size"`
	PadTokenID    *int     `json:"pad_token_id"`
	ConvKernel    []int    `json:"conv_kernel"`
	ConvStride    []int    `json:"conv_stride"`
	FeatNorm      string   `json:"feat_extract_norm"`
	EncoderConfig *struct {
		SubsamplingFactor int `json:"subsampling_factor"`
		NumMelBins        int `json:"num_mel_bins"`
	} `json:"encoder_config"`
	Language any `json:"language"`
}

// w2vFamily are the architectures sharing Wav2Vec2ForCTC's interface.
var w2vFamily = map[string]bool{"Wav2Vec2ForCTC": true, "HubertForCTC": true, "WavLMForCTC": true,
	"Data2VecAudioForCTC": true, "Wav2Vec2ConformerForCTC": true, "UniSpeechForCTC": true, "UniSpeechSatForCTC": true,
	"SEWForCTC": true, "SEWDForCTC": true}
var w2vModelTypes = map[string]string{"wav2vec2": "Wav2Vec2ForCTC", "hubert": "HubertForCTC", "wavlm": "WavLMForCTC",
	"data2vec-audio": "Data2VecAudioForCTC", "wav2vec2-conformer": "Wav2Vec2ConformerForCTC", "parakeet_ctc": "ParakeetForCTC"}

func readJSON(path string, v any) error {
	b, err := readLimited(path, 64<<20)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: JSON: %w", path, err)
	}
	return nil
}

// featureExtractor reads processor_config.json's feature_extractor
// (transformers >= 5) or preprocessor_config.json (earlier).
func (d *detector) featureExtractor() (map[string]any, string, error) {
	for _, name := range []string{"preprocessor_config.json", "processor_config.json"} {
		if !d.has[name] {
			continue
		}
		var raw map[string]any
		if err := readJSON(d.path(name), &raw); err != nil {
			return nil, "", err
		}
		if fe, ok := raw["feature_extractor"].(map[string]any); ok {
			return fe, name + " feature_extractor", nil
		}
		if _, ok := raw["feature_extractor_type"]; ok {
			return raw, name, nil
		}
	}
	return nil, "", fmt.Errorf("%s: no preprocessor_config.json (or processor_config.json with a feature_extractor): the frontend settings are unknown", d.dir)
}

func (d *detector) huggingFace() error {
	m := d.m
	var cfg hfConfig
	if err := readJSON(d.path("config.json"), &cfg); err != nil {
		return err
	}
	arch := ""
	for _, a := range cfg.Architectures {
		if w2vFamily[a] || a == "ParakeetForCTC" {
			arch = a
		}
	}
	archSrc := "config.json architectures"
	if arch == "" && len(cfg.Architectures) == 0 {
		arch, archSrc = w2vModelTypes[cfg.ModelType], "config.json model_type"
	}
	if arch == "" {
		return fmt.Errorf("%s: config.json architectures %v (model_type %q): edge runs CTC models of the families Wav2Vec2ForCTC (HuBERT, WavLM, Data2VecAudio) and ParakeetForCTC",
			d.dir, cfg.Architectures, cfg.ModelType)
	}
	m.Name = "hf-" + strings.ToLower(strings.TrimSuffix(arch, "ForCTC"))
	d.set("name", archSrc)
	d.language(cfg.Language, "config.json language")
	if err := d.pickONNX("model.onnx", filepath.Join("onnx", "model.onnx")); err != nil {
		return err
	}
	if err := d.mapIO(func(string) bool { return false }); err != nil {
		return err
	}
	fe, feSrc, err := d.featureExtractor()
	if err != nil {
		return err
	}
	num := func(key string, def float64) (float64, error) {
		x, ok := fe[key]
		if !ok || x == nil {
			return def, nil
		}
		f, ok := toFloat(x)
		if !ok {
			return 0, fmt.Errorf("%s: %s = %v is not a number", feSrc, key, x)
		}
		return f, nil
	}
	sr, err := num("sampling_rate", 16000)
	if err != nil {
		return err
	}
	if arch == "ParakeetForCTC" {
		m.Format = FormatHFPara
		if t, _ := fe["feature_extractor_type"].(string); t != "ParakeetFeatureExtractor" {
			return fmt.Errorf("%s: feature_extractor_type %q: a ParakeetForCTC model needs the ParakeetFeatureExtractor frontend", feSrc, t)
		}
		p := frontendParams{sampleRate: int(sr), normalize: "per_feature"}
		vals := map[string]*int{"feature_size": &p.mels, "n_fft": &p.nfft, "win_length": &p.win, "hop_length": &p.hop}
		defs := map[string]float64{"feature_size": 80, "n_fft": 512, "win_length": 400, "hop_length": 160}
		for key, dst := range vals {
			f, err := num(key, defs[key])
			if err != nil {
				return err
			}
			if f != math.Trunc(f) || f <= 0 || f > 1<<16 {
				return fmt.Errorf("%s: %s = %v: want a positive whole number", feSrc, key, f)
			}
			*dst = int(f)
		}
		if p.win > p.nfft {
			return fmt.Errorf("%s: win_length %d is longer than n_fft %d", feSrc, p.win, p.nfft)
		}
		if p.preemph, err = num("preemphasis", 0.97); err != nil {
			return err
		}
		if p.preemph < 0 || p.preemph >= 1 {
			return fmt.Errorf("%s: preemphasis = %v: the fbank op reproduces 0 <= a < 1", feSrc, p.preemph)
		}
		if x, ok := fe["do_normalize"]; ok && x == true {
			return fmt.Errorf("%s: do_normalize = true: ParakeetFeatureExtractor's waveform normalisation is not reproduced", feSrc)
		}
		if _, ok := m.Encoder.Inputs[InputFeatures]; !ok {
			return fmt.Errorf("%s: a ParakeetForCTC export takes input_features [B, T, n_mels]; this one's inputs are %s", d.onnx.Path, tensorList(d.onnx.Inputs))
		}
		layout, err := d.layout(p.mels, LayoutTimeMel)
		if err != nil {
			return err
		}
		d.parakeetFrontend(p, layout, feSrc)
		sub := 8
		subSrc := "ParakeetEncoderConfig's default subsampling_factor 8"
		if cfg.EncoderConfig != nil && cfg.EncoderConfig.SubsamplingFactor > 0 {
			sub, subSrc = cfg.EncoderConfig.SubsamplingFactor, "config.json encoder_config.subsampling_factor"
		}
		if cfg.EncoderConfig != nil && cfg.EncoderConfig.NumMelBins > 0 && cfg.EncoderConfig.NumMelBins != p.mels {
			return fmt.Errorf("%s: encoder_config.num_mel_bins = %d, but %s feature_size = %d", d.path("config.json"), cfg.EncoderConfig.NumMelBins, feSrc, p.mels)
		}
		m.FrameStride = float64(sub*p.hop) / float64(p.sampleRate)
		d.set("frame_stride", fmt.Sprintf("%s (%d) x %s hop_length (%d samples)", subSrc, sub, feSrc, p.hop))
	} else {
		m.Format = FormatHFW2V
		if _, ok := m.Encoder.Inputs[InputPCM]; !ok {
			return fmt.Errorf("%s: a %s export takes raw waveform input_values [B, N]; this one's inputs are %s", d.onnx.Path, arch, tensorList(d.onnx.Inputs))
		}
		if t, _ := fe["feature_extractor_type"].(string); t != "" && t != "Wav2Vec2FeatureExtractor" {
			return fmt.Errorf("%s: feature_extractor_type %q: a %s model needs Wav2Vec2FeatureExtractor", feSrc, t, arch)
		}
		m.SampleRate = int(sr)
		d.set("sample_rate", feSrc+" sampling_rate")
		if x, _ := fe["do_normalize"].(bool); x {
			m.Normalize = NormalizePerUtterance
			d.set("normalize", feSrc+" do_normalize (zero mean, unit variance per utterance)")
		} else {
			d.set("normalize", feSrc+" do_normalize false")
		}
		kernel, stride := cfg.ConvKernel, cfg.ConvStride
		if len(kernel) == 0 && len(stride) == 0 {
			kernel, stride = []int{10, 3, 3, 3, 3, 2, 2}, []int{5, 2, 2, 2, 2, 2, 2}
		}
		if len(kernel) != len(stride) || len(kernel) == 0 || len(kernel) > 64 {
			return fmt.Errorf("config.json: conv_kernel %v and conv_stride %v: want one kernel and stride per feature-encoder layer", kernel, stride)
		}
		hop, field := 1, 1
		for i := range kernel {
			if kernel[i] < 1 || stride[i] < 1 || hop > 1<<20 {
				return fmt.Errorf("config.json: conv_kernel %v / conv_stride %v: sizes must be positive", kernel, stride)
			}
			field += (kernel[i] - 1) * hop
			hop *= stride[i]
		}
		m.FrameStride = float64(hop) / sr
		d.set("frame_stride", fmt.Sprintf("config.json conv_stride %v: %d samples per frame", stride, hop))
		m.FrameOffset = float64(max(0, (field-hop)/2)) / sr
		d.set("frame_offset", fmt.Sprintf("config.json conv_kernel %v: a %d-sample receptive field, centred on each %d-sample frame", kernel, field, hop))
		if cfg.FeatNorm == "group" {
			m.PaddingSensitive = true
			d.set("padding_sensitive", "config.json feat_extract_norm group (normalised over the padded length)")
			m.Notes = append(m.Notes, "config.json feat_extract_norm group: the output changes with batch padding, so edge encodes each clip unpadded")
		}
	}
	return d.hfVocabulary(arch, cfg)
}

// hfVocabulary reads the tokens, blank and word boundaries of an HF export.
func (d *detector) hfVocabulary(arch string, cfg hfConfig) error {
	m := d.m
	var tc map[string]any
	if d.has["tokenizer_config.json"] {
		if err := readJSON(d.path("tokenizer_config.json"), &tc); err != nil {
			return err
		}
	}
	tokenStr := func(key string) string {
		switch v := tc[key].(type) {
		case string:
			return v
		case map[string]any:
			s, _ := v["content"].(string)
			return s
		}
		return ""
	}
	var file string
	switch {
	case d.has["vocab.json"]:
		file = "vocab.json"
	case d.has["tokenizer.json"]:
		file = "tokenizer.json"
	default:
		return fmt.Errorf("%s: no vocab.json or tokenizer.json: the model's tokens are unknown", d.dir)
	}
	m.Vocabulary = file
	d.set("vocabulary", file)
	v, err := LoadVocabularyFile(d.path(file))
	if err != nil {
		return err
	}
	if file == "tokenizer.json" {
		m.Tokenizer = file
		d.set("tokenizer", file)
	}
	if cfg.VocabSize > 0 && cfg.VocabSize != v.Len() {
		return fmt.Errorf("%s: config.json vocab_size = %d, but %s has %d tokens", d.dir, cfg.VocabSize, file, v.Len())
	}
	// blank = the pad token
	switch pad := tokenStr("pad_token"); {
	case cfg.PadTokenID != nil:
		m.BlankID = *cfg.PadTokenID
		d.set("blank_id", "config.json pad_token_id (the CTC blank is the pad token)")
	case pad != "":
		id, ok := v.ID(pad)
		if !ok {
			return fmt.Errorf("%s: tokenizer_config.json pad_token %q is not in %s", d.dir, pad, file)
		}
		m.BlankID = id
		d.set("blank_id", "tokenizer_config.json pad_token (the CTC blank is the pad token)")
	default:
		return fmt.Errorf("%s: neither config.json pad_token_id nor tokenizer_config.json pad_token: the CTC blank is unknown", d.dir)
	}
	if _, ok := v.Token(m.BlankID); !ok {
		return fmt.Errorf("%s: the blank (pad token) id %d is outside %s's %d tokens", d.dir, m.BlankID, file, v.Len())
	}
	if arch != "ParakeetForCTC" {
		delim := firstNonEmpty(tokenStr("word_delimiter_token"), "|")
		if _, ok := v.ID(delim); ok {
			m.WordDelimiter = delim
			d.set("word_delimiter", "tokenizer_config.json word_delimiter_token")
			return nil
		}
	}
	if V := d.outputClasses(); V > 0 && V != v.Len() {
		return fmt.Errorf("%s: the model emits %d classes; %s has %d tokens", d.onnx.Path, V, file, v.Len())
	}
	return d.wordRule(v, file)
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
