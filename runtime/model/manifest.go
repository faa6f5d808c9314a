// Package model loads model manifests: the models/<name>/model.yaml files
// that say how to run a CTC speech model (frontend, ONNX encoder and its
// tensor names, vocabulary, blank id, frame stride, word boundaries).
//
// A manifest for a NeMo/sherpa-onnx style CTC export:
//
//	name: edge-char-ctc
//	sample_rate: 16000
//	frontend: {preset: parakeet-128, layout: mel_time}  # fbank params
//	normalize: none
//	encoder:
//	  file: model.onnx
//	  inputs:  {features: audio_signal, lengths: length}   # edge name -> ONNX name
//	  outputs: {log_probs: logprobs, lengths: encoded_lengths}
//	vocabulary: tokens.txt
//	blank_id: 0
//	frame_stride: 0.02
//	word_delimiter: "▁"
//
// and for a wav2vec2 style raw-waveform export (no frontend):
//
//	normalize: per_utterance
//	encoder:
//	  file: model.onnx
//	  inputs:  {pcm: input_values}
//	  outputs: {logits: logits}
//
// This package only reads and checks files; runtime/onnx checks the encoder's
// declared inputs and outputs against the manifest when it opens the model.
package model

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FileName is the manifest's name inside a model directory.
const FileName = "model.yaml"

// Edge-side names of encoder inputs and outputs (the keys of encoder.inputs
// and encoder.outputs).
const (
	// InputFeatures is a spectrogram [B, n_mels, T] or [B, T, n_mels] (f32),
	// laid out as frontend.layout says.
	InputFeatures = "features"
	// InputPCM is raw waveform [B, N] (f32) for models without a frontend.
	InputPCM = "pcm"
	// InputLengths is the valid length of each batch item (frames for
	// features, samples for pcm), an integer [B].
	InputLengths = "lengths"
	// InputAttentionMask is a [B, N] 1/0 mask built from the lengths.
	InputAttentionMask = "attention_mask"
	// OutputLogProbs is CTC log-probabilities [B, T', V] (log-softmax applied).
	OutputLogProbs = "log_probs"
	// OutputLogits is unnormalised CTC scores [B, T', V]; the encoder applies
	// log-softmax over V.
	OutputLogits = "logits"
	// OutputLengths is the valid output frames of each batch item, integer [B].
	OutputLengths = "lengths"
)

// Frontend layouts (the fbank op's layout parameter).
const (
	LayoutMelTime = "mel_time"
	LayoutTimeMel = "time_mel"
)

// Normalisations of raw-waveform input.
const (
	NormalizeNone = "none"
	// NormalizePerUtterance scales each item's valid samples to zero mean and
	// unit variance, as HF Wav2Vec2FeatureExtractor(do_normalize=True).
	NormalizePerUtterance = "per_utterance"
)

// Manifest is a parsed, validated model.yaml.
type Manifest struct {
	Name       string `yaml:"name"`
	SampleRate int    `yaml:"sample_rate"`
	// Language is the ISO-639-1 or -3 code (lower case, e.g. "en") of the
	// language the model transcribes; empty when unknown or several.
	// edge serve refuses requests naming another (serve.languages
	// overrides it).
	Language string `yaml:"language,omitempty"`
	// Frontend holds the fbank op parameters (preset, layout, ...); nil for
	// raw-waveform models.
	Frontend map[string]any `yaml:"frontend"`
	// Normalize is NormalizeNone (the default) or NormalizePerUtterance.
	Normalize string  `yaml:"normalize"`
	Encoder   Encoder `yaml:"encoder"`
	// Vocabulary is the vocabulary file (tokens.txt, vocab.json,
	// tokenizer.json, a SentencePiece .model or a NeMo model_config.yaml's
	// decoder.vocabulary), relative to Dir unless absolute.
	Vocabulary string `yaml:"vocabulary"`
	BlankID    int    `yaml:"blank_id"`
	// FrameStride is the duration of one encoder output frame in seconds.
	FrameStride float64 `yaml:"frame_stride"`
	// WordDelimiter is the token that separates words in character-level
	// vocabularies ("▁" or "|"); SentencePieceMarker instead marks the first
	// piece of each word. At most one is set.
	WordDelimiter       string `yaml:"word_delimiter"`
	SentencePieceMarker string `yaml:"sentencepiece_marker"`
	// FrameOffset is added to every frame time, in seconds: the centre of
	// frame 0's receptive field less half a frame (wav2vec2: 2.5 ms).
	FrameOffset float64 `yaml:"frame_offset,omitempty"`
	// Tokenizer is the subword model text is encoded with for alignment (a
	// SentencePiece .model or a tokenizer.json); empty: character
	// vocabularies spell words letter by letter, SentencePiece-style
	// vocabularies are encoded by BPE in id order.
	Tokenizer string `yaml:"tokenizer,omitempty"`
	// SpecialTokens never appear in output text; default: every symbol of
	// the form <...>.
	SpecialTokens []string `yaml:"special_tokens,omitempty"`
	// PaddingSensitive says the encoder's output for an item changes with
	// the padding of a batch whatever its lengths or mask say (a wav2vec2
	// feature encoder with group normalisation: detection sets it); package
	// asr then encodes each chunk alone.
	PaddingSensitive bool `yaml:"padding_sensitive,omitempty"`

	// Dir is the directory relative paths resolve against (the manifest's).
	Dir string `yaml:"-"`
	// Vocab is the loaded vocabulary (set by Load; nil after Parse). With
	// blank_id equal to the file's token count, a blank symbol is appended.
	Vocab *Vocabulary `yaml:"-"`
	// Tok encodes text for alignment (set by Load; nil for character vocabularies).
	Tok *Tokenizer `yaml:"-"`
	// Format is how the manifest was made: FormatManifest or a detected format.
	Format string `yaml:"-"`
	// Sources says, per key (name, frontend.preset, blank_id, ...), which
	// file and value it came from; detection fills it.
	Sources map[string]string `yaml:"-"`
	// Notes are caveats detection found (shown by edge models inspect).
	Notes []string `yaml:"-"`
}

// Specials is the set of special token ids (never in output text).
func (m *Manifest) Specials() map[int]bool {
	out := map[int]bool{}
	if m.Vocab == nil {
		return out
	}
	if m.SpecialTokens != nil {
		for _, s := range m.SpecialTokens {
			if id, ok := m.Vocab.ID(s); ok {
				out[id] = true
			}
		}
		return out
	}
	for id, s := range m.Vocab.Tokens() {
		if IsSpecialToken(s) {
			out[id] = true
		}
	}
	return out
}

// TokenizerPath is the absolute or Dir-relative path of the tokenizer ("" if none).
func (m *Manifest) TokenizerPath() string { return m.resolve(m.Tokenizer) }

// Encoder names the ONNX file and maps edge tensor names to the model's.
type Encoder struct {
	// File is the .onnx path, relative to the manifest's directory unless absolute.
	File string `yaml:"file"`
	// Int8File is an int8-quantised copy of File with the same inputs and
	// outputs (see UsePrecision); empty: Int8FileName beside File, if any.
	Int8File string            `yaml:"int8_file,omitempty"`
	Inputs   map[string]string `yaml:"inputs"`
	Outputs  map[string]string `yaml:"outputs"`
}

// EncoderPath is the absolute or Dir-relative path of the ONNX file.
func (m *Manifest) EncoderPath() string { return m.resolve(m.Encoder.File) }

// Encoder precisions (UsePrecision).
const (
	// PrecisionFP32 is the encoder as encoder.file names it (the default).
	PrecisionFP32 = "fp32"
	// PrecisionInt8 is its int8 dynamically quantised copy.
	PrecisionInt8 = "int8"
)

// Int8FileName is the int8 encoder's name beside model.onnx, as sherpa-onnx
// ships its int8 exports.
const Int8FileName = "model.int8.onnx"

// UsePrecision points encoder.file at the encoder of precision p:
// PrecisionFP32 or "" leaves it as it is; PrecisionInt8 selects
// encoder.int8_file or, when the manifest names none, Int8FileName in
// encoder.file's directory (which may be encoder.file itself, for an
// export that ships only the int8 file). A model without an int8 encoder,
// or another precision, is an error naming what was looked for.
// UsePrecision is not safe for concurrent use with readers of m.
func (m *Manifest) UsePrecision(p string) error {
	switch p {
	case "", PrecisionFP32:
		return nil
	case PrecisionInt8:
	default:
		return fmt.Errorf("precision %q is not %s or %s", p, PrecisionFP32, PrecisionInt8)
	}
	file, src := m.Encoder.Int8File, "encoder.int8_file"
	if file == "" {
		file, src = filepath.Join(filepath.Dir(m.Encoder.File), Int8FileName), Int8FileName+" beside encoder.file"
	}
	path := m.resolve(file)
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && m.Encoder.Int8File == "":
		return fmt.Errorf("model %s has no int8 encoder: %s does not exist and no encoder.int8_file names one in a %s", m.Dir, path, FileName)
	case err != nil:
		return fmt.Errorf("precision int8: %s: %w", src, err)
	case st.IsDir():
		return fmt.Errorf("precision int8: %s %s is a directory, want an .onnx file", src, path)
	}
	m.Encoder.File = file
	if m.Sources != nil {
		m.Sources["encoder.file"] = src + " (precision int8)"
	}
	return nil
}

// VocabularyPath is the absolute or Dir-relative path of the vocabulary file.
func (m *Manifest) VocabularyPath() string { return m.resolve(m.Vocabulary) }

// Layout is the frontend layout ("" for raw-waveform models).
func (m *Manifest) Layout() string {
	s, _ := m.Frontend["layout"].(string)
	return s
}

// RawWaveform reports whether the encoder takes pcm instead of features.
func (m *Manifest) RawWaveform() bool { return m.Frontend == nil }

func (m *Manifest) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(m.Dir, p)
}

// maxManifestBytes bounds what Load reads: manifests are a few hundred bytes.
const maxManifestBytes = 1 << 20

// Load reads a manifest from a model directory or a manifest file, checks
// it (see Parse), checks that the encoder file exists and loads the
// vocabulary, checking blank_id and the word delimiter against it. A
// directory's model.yaml is the manifest; a directory without one is
// detected (see Detect) and gives the same Manifest.
func Load(path string) (*Manifest, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, FileName)); errors.Is(err, os.ErrNotExist) {
			m, err := Detect(path)
			if err != nil {
				return nil, fmt.Errorf("%s has no %s; detecting the export's format: %w", path, FileName, err)
			}
			return m, nil
		}
		path = filepath.Join(path, FileName)
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("model manifest %s does not exist (want a model directory holding %s, or the manifest file)", path, FileName)
		}
		return nil, fmt.Errorf("model manifest: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("model manifest %s: %w", path, err)
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("model manifest %s is larger than %d bytes", path, maxManifestBytes)
	}
	m, err := Parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("model manifest %s: %w", path, err)
	}
	if err := m.loadFiles(); err != nil {
		return nil, fmt.Errorf("model manifest %s: %w", path, err)
	}
	m.Format = FormatManifest
	m.Sources = map[string]string{}
	for _, k := range []string{"name", "sample_rate", "frontend", "normalize", "encoder.file", "encoder.inputs", "encoder.outputs",
		"encoder.int8_file", "vocabulary", "blank_id", "frame_stride", "frame_offset", "word_delimiter", "sentencepiece_marker", "tokenizer", "special_tokens", "padding_sensitive"} {
		m.Sources[k] = filepath.Base(path)
	}
	return m, nil
}

func (m *Manifest) loadFiles() error {
	p := m.EncoderPath()
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("encoder.file: %w", err)
	}
	if st.IsDir() {
		return fmt.Errorf("encoder.file %s is a directory, want an .onnx file", p)
	}
	var v *Vocabulary
	if strings.HasSuffix(strings.ToLower(m.Vocabulary), ".yaml") { // a NeMo model_config.yaml's decoder.vocabulary
		cfg, err := readNeMoConfig(m.VocabularyPath())
		if err != nil {
			return fmt.Errorf("vocabulary: %w", err)
		}
		if v, err = NewVocabulary(cfg.Decoder.Vocabulary); err != nil {
			return fmt.Errorf("vocabulary %s decoder.vocabulary: %w", m.VocabularyPath(), err)
		}
	} else if v, err = LoadVocabularyFile(m.VocabularyPath()); err != nil {
		return err
	}
	if m.BlankID == v.Len() {
		v = v.withBlank() // NeMo: the blank follows the tokenizer's pieces
	}
	if _, ok := v.Token(m.BlankID); !ok {
		return fmt.Errorf("blank_id %d is out of range: the vocabulary has %d tokens (ids 0..%d, or %d for a blank appended after them)", m.BlankID, v.Len(), v.Len()-1, v.Len())
	}
	if m.Tokenizer != "" {
		t, err := LoadTokenizer(m.TokenizerPath())
		if err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
		for id, piece := range t.Pieces() {
			if vid, ok := v.ID(piece); !ok || vid != id {
				return fmt.Errorf("tokenizer %s: piece %d %q is not id %d of the vocabulary %s", m.TokenizerPath(), id, piece, id, m.VocabularyPath())
			}
		}
		m.Tok = t
	} else if m.SentencePieceMarker != "" {
		m.Tok = TokenizerFromVocabulary(v, m.VocabularyPath())
	}
	if d := m.WordDelimiter; d != "" {
		if _, ok := v.ID(d); !ok {
			return fmt.Errorf("word_delimiter %q is not a token of the vocabulary %s", d, m.VocabularyPath())
		}
	}
	if mk := m.SentencePieceMarker; mk != "" {
		if !slices.ContainsFunc(v.Tokens(), func(t string) bool { return strings.HasPrefix(t, mk) }) {
			return fmt.Errorf("sentencepiece_marker %q starts no token of the vocabulary %s", mk, m.VocabularyPath())
		}
	}
	m.Vocab = v
	return nil
}

// Parse decodes and checks a manifest without touching the file system;
// dir is what relative paths resolve against. Unknown keys are an error, as
// are missing required fields (name, sample_rate, encoder.file and its
// input/output names, vocabulary, frame_stride), an unknown frontend layout
// or normalisation, and encoder names that do not fit the model kind:
// features with a frontend, pcm without one.
func Parse(data []byte, dir string) (*Manifest, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("empty manifest")
		}
		return nil, fmt.Errorf("YAML: %w", err)
	}
	m.Dir = dir
	if m.Normalize == "" {
		m.Normalize = NormalizeNone
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if strings.TrimSpace(m.Name) == "" {
		bad("name is missing")
	}
	if m.Language != "" && !languageCode(m.Language) {
		bad("language %q is not a lower-case ISO-639-1 or -3 code such as en or eng", m.Language)
	}
	if m.SampleRate <= 0 || m.SampleRate > 384000 {
		bad("sample_rate %d is out of range (want 1..384000 Hz, e.g. 16000)", m.SampleRate)
	}
	if m.Frontend != nil {
		if p, ok := m.Frontend["preset"].(string); !ok || p == "" {
			bad("frontend.preset is missing (e.g. parakeet-128); leave frontend out for raw-waveform models")
		}
		if l, ok := m.Frontend["layout"]; ok && l != LayoutMelTime && l != LayoutTimeMel {
			bad("frontend.layout %v is not %s or %s", l, LayoutMelTime, LayoutTimeMel)
		}
	}
	switch m.Normalize {
	case NormalizeNone:
	case NormalizePerUtterance:
		if m.Frontend != nil {
			bad("normalize: %s applies to raw-waveform models; features are normalised by the frontend", m.Normalize)
		}
	default:
		bad("normalize %q is not %s or %s", m.Normalize, NormalizeNone, NormalizePerUtterance)
	}
	if m.Encoder.File == "" {
		bad("encoder.file is missing (the .onnx file)")
	}
	m.validateIO(bad)
	if m.Vocabulary == "" {
		bad("vocabulary is missing (a tokens.txt, vocab.json, tokenizer.json or SentencePiece .model file)")
	}
	if m.BlankID < 0 {
		bad("blank_id %d is negative", m.BlankID)
	}
	if !(m.FrameStride > 0 && m.FrameStride <= 10) || math.IsNaN(m.FrameStride) {
		bad("frame_stride %v is out of range (want seconds per encoder frame, e.g. 0.02 or 0.04)", m.FrameStride)
	}
	if !(math.Abs(m.FrameOffset) <= 10) {
		bad("frame_offset %v is out of range (want seconds, |offset| <= 10)", m.FrameOffset)
	}
	if m.WordDelimiter != "" && m.SentencePieceMarker != "" {
		bad("word_delimiter and sentencepiece_marker are both set; a vocabulary uses one or the other")
	}
	return errors.Join(errs...)
}

func (m *Manifest) validateIO(bad func(string, ...any)) {
	in, out := m.Encoder.Inputs, m.Encoder.Outputs
	checkKeys := func(what string, names map[string]string, allowed ...string) {
		keys := make([]string, 0, len(names))
		for k := range names {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !slices.Contains(allowed, k) {
				bad("encoder.%s has unknown name %q (want %s)", what, k, strings.Join(allowed, ", "))
			} else if names[k] == "" {
				bad("encoder.%s.%s has no ONNX name", what, k)
			}
		}
	}
	checkKeys("inputs", in, InputFeatures, InputPCM, InputLengths, InputAttentionMask)
	checkKeys("outputs", out, OutputLogProbs, OutputLogits, OutputLengths)
	_, feat := in[InputFeatures]
	_, pcm := in[InputPCM]
	switch {
	case feat && pcm:
		bad("encoder.inputs has both features and pcm; a model takes one")
	case m.Frontend != nil && !feat:
		bad("encoder.inputs.features is missing (the ONNX input fed the frontend's features)")
	case m.Frontend == nil && !pcm:
		bad("encoder.inputs.pcm is missing: without a frontend the model takes raw waveform (or add frontend: {preset: ...} and inputs.features)")
	case m.Frontend == nil && feat:
		bad("encoder.inputs.features needs a frontend")
	}
	_, lp := out[OutputLogProbs]
	_, lg := out[OutputLogits]
	switch {
	case lp && lg:
		bad("encoder.outputs has both log_probs and logits; name the one the model produces")
	case !lp && !lg:
		bad("encoder.outputs needs log_probs (log-softmax applied) or logits")
	}
}

// languageCode reports whether s is two or three lower-case ASCII letters.
func languageCode(s string) bool {
	if len(s) < 2 || len(s) > 3 {
		return false
	}
	for _, c := range []byte(s) {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
