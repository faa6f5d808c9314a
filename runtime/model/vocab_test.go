package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadVocabulary(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "sherpa", in: "<blk> 0\n▁ 1\na 2\nb 3\n", want: []string{"<blk>", "▁", "a", "b"}},
		{name: "any order", in: "b 2\n<blk> 0\na 1\n", want: []string{"<blk>", "a", "b"}},
		{name: "bom crlf blank lines", in: "\ufeff<blk> 0\r\n\r\n' 1\r\n", want: []string{"<blk>", "'"}},
		{name: "tabs", in: "<blk>\t0\nx\t1", want: []string{"<blk>", "x"}},
		{name: "space token", in: "<blk> 0\n 1\n", want: []string{"<blk>", " "}},
		{name: "empty", in: "", wantErr: "no tokens"},
		{name: "only blanks", in: "\n  \n", wantErr: "no tokens"},
		{name: "no id", in: "<blk> 0\nabc\n", wantErr: `line 2: want "symbol id", got "abc"`},
		{name: "three fields", in: "a b 0\n", wantErr: `line 1: want "symbol id"`},
		{name: "bad id", in: "a x\n", wantErr: `line 1: id "x" is not a non-negative integer`},
		{name: "negative id", in: "a -1\n", wantErr: `id "-1" is not a non-negative integer`},
		{name: "gap", in: "a 0\nb 2\n", wantErr: "line 2: id 2 out of range: 2 tokens need ids 0..1"},
		{name: "huge id", in: "a 0\nb 99999999999\n", wantErr: "line 2: id 99999999999 out of range"},
		{name: "duplicate id", in: "a 0\nb 0\n", wantErr: "line 2: id 0 given twice"},
		{name: "duplicate symbol", in: "a 0\na 1\n", wantErr: `line 2: symbol "a" appears twice (ids 0 and 1)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ReadVocabulary(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, v.Tokens())
			assert.Equal(t, len(tc.want), v.Len())
			for id, sym := range tc.want {
				got, ok := v.ID(sym)
				assert.True(t, ok)
				assert.Equal(t, id, got)
				s, ok := v.Token(id)
				assert.True(t, ok)
				assert.Equal(t, sym, s)
			}
			_, ok := v.Token(len(tc.want))
			assert.False(t, ok)
			_, ok = v.Token(-1)
			assert.False(t, ok)
			_, ok = v.ID("not a token")
			assert.False(t, ok)
		})
	}
}

func TestLoadVocabularyMissing(t *testing.T) {
	_, err := LoadVocabulary(t.TempDir() + "/tokens.txt")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tokens.txt")
}

// FuzzReadVocabulary checks that any bytes give a vocabulary with dense ids
// and unique symbols, or an error, and never a panic.
func FuzzReadVocabulary(f *testing.F) {
	for _, s := range []string{"<blk> 0\n▁ 1\na 2\n", " 0\n", "a 1\nb 0", "a 0\na 0", "x 5", "\ufeffa 0\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ReadVocabulary(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for id, sym := range v.Tokens() {
			require.False(t, seen[sym], "duplicate symbol %q", sym)
			seen[sym] = true
			got, ok := v.ID(sym)
			require.True(t, ok)
			require.Equal(t, id, got)
		}
	})
}
