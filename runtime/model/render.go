package model

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// YAML renders the manifest as a model.yaml that Load reads back to the
// same manifest, each value commented with where it came from
// (Sources), for `edge models inspect`.
func (m *Manifest) YAML() ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	src := func(key string) string {
		if s := m.Sources[key]; s != "" {
			return "from " + s
		}
		return ""
	}
	scalar := func(v any) *yaml.Node {
		n := &yaml.Node{Kind: yaml.ScalarNode}
		switch x := v.(type) {
		case string:
			n.Value, n.Tag = x, "!!str"
			if x == "" || x == " " || x == "|" || x == "\u2581" || x[0] == '<' {
				n.Style = yaml.DoubleQuotedStyle
			}
		case int:
			n.Value, n.Tag = strconv.Itoa(x), "!!int"
		case float64:
			n.Value, n.Tag = strconv.FormatFloat(x, 'g', -1, 64), "!!float"
		case bool:
			n.Value, n.Tag = strconv.FormatBool(x), "!!bool"
		default:
			n.Value, n.Tag = fmt.Sprint(x), "!!str"
		}
		return n
	}
	add := func(parent *yaml.Node, key string, value *yaml.Node, comment string) {
		k := &yaml.Node{Kind: yaml.ScalarNode, Value: key, Tag: "!!str"}
		if value.Kind == yaml.ScalarNode {
			value.LineComment = comment
		} else {
			k.LineComment = comment
		}
		parent.Content = append(parent.Content, k, value)
	}
	mapping := func(kv map[string]string, comment func(string) string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range sortedKeys(kv) {
			add(n, k, scalar(kv[k]), comment(k))
		}
		return n
	}
	add(root, "name", scalar(m.Name), src("name"))
	if m.Language != "" {
		add(root, "language", scalar(m.Language), src("language"))
	}
	add(root, "sample_rate", scalar(m.SampleRate), src("sample_rate"))
	if m.Frontend != nil {
		fe := &yaml.Node{Kind: yaml.MappingNode}
		keys := make([]string, 0, len(m.Frontend))
		for k := range m.Frontend {
			if k != "preset" && k != "layout" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range append([]string{"preset", "layout"}, keys...) {
			if v, ok := m.Frontend[k]; ok {
				add(fe, k, scalar(v), src("frontend."+k))
			}
		}
		add(root, "frontend", fe, src("frontend"))
	}
	add(root, "normalize", scalar(m.Normalize), src("normalize"))
	enc := &yaml.Node{Kind: yaml.MappingNode}
	add(enc, "file", scalar(m.Encoder.File), src("encoder.file"))
	if m.Encoder.Int8File != "" {
		add(enc, "int8_file", scalar(m.Encoder.Int8File), src("encoder.int8_file"))
	}
	none := func(string) string { return "" }
	add(enc, "inputs", mapping(m.Encoder.Inputs, none), src("encoder.inputs"))
	add(enc, "outputs", mapping(m.Encoder.Outputs, none), src("encoder.outputs"))
	add(root, "encoder", enc, "")
	add(root, "vocabulary", scalar(m.Vocabulary), src("vocabulary"))
	blank := src("blank_id")
	if m.Vocab != nil {
		if s, ok := m.Vocab.Token(m.BlankID); ok {
			blank = fmt.Sprintf("%q; %s", s, blank)
		}
	}
	add(root, "blank_id", scalar(m.BlankID), blank)
	add(root, "frame_stride", scalar(m.FrameStride), src("frame_stride"))
	if m.FrameOffset != 0 {
		add(root, "frame_offset", scalar(m.FrameOffset), src("frame_offset"))
	}
	if m.WordDelimiter != "" {
		add(root, "word_delimiter", scalar(m.WordDelimiter), src("word_delimiter"))
	}
	if m.SentencePieceMarker != "" {
		add(root, "sentencepiece_marker", scalar(m.SentencePieceMarker), src("sentencepiece_marker"))
	}
	if m.Tokenizer != "" {
		add(root, "tokenizer", scalar(m.Tokenizer), src("tokenizer"))
	}
	if m.SpecialTokens != nil {
		list := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, s := range m.SpecialTokens {
			list.Content = append(list.Content, scalar(s))
		}
		add(root, "special_tokens", list, src("special_tokens"))
	}
	if m.PaddingSensitive {
		add(root, "padding_sensitive", scalar(true), src("padding_sensitive"))
	}
	var buf bytes.Buffer
	enc2 := yaml.NewEncoder(&buf)
	enc2.SetIndent(2)
	if err := enc2.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}); err != nil {
		return nil, err
	}
	if err := enc2.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
