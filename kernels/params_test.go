package kernels

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/kernels/internal/cabi"
)

// mirrors is every Go mirror of a params.h struct, by its C name.
var mirrors = map[string]reflect.Type{}

func init() {
	for _, v := range []any{
		DpxCheckParams{}, DpxQuantizeParams{}, DpxCtcParams{}, DpxViterbiParams{}, DpxDtwParams{},
		PipelineLogSoftmaxParams{}, PipelineNormalizePCMParams{}, PipelineCtcArgmaxParams{}, PipelineCtcCollapseParams{},
		FbankStatsParams{}, FbankNormalizeParams{}, FbankLogmelParams{},
		RvqEncodeParams{}, RvqSmallScoreParams{}, RvqSmallUpdateParams{}, RvqStreamParams{}, RvqPadRowsParams{},
		RvqCheckParams{}, RvqDecodeParams{}, RvqEncodeF32Params{},
	} {
		t := reflect.TypeOf(v)
		mirrors[t.Name()] = t
	}
}

// TestParamsLayout pins every Go mirror to the C compiler's layout of its
// params.h struct: the same structs, the same size, and field for field the
// same name (first letter upper-cased), offset, size and kind. A field
// added, dropped, reordered, renamed or retyped on either side fails here,
// before a kernel could read a parameter at the wrong place.
func TestParamsLayout(t *testing.T) {
	hdr, err := os.ReadFile("params.h")
	require.NoError(t, err)
	var inHeader []string
	for _, m := range regexp.MustCompile(`(?m)^typedef struct (\w+) \{`).FindAllSubmatch(hdr, -1) {
		inHeader = append(inHeader, string(m[1]))
	}
	sort.Strings(inHeader)
	structs := cabi.Structs()
	var inC, inGo []string
	for _, s := range structs {
		inC = append(inC, s.Name)
	}
	for n := range mirrors {
		inGo = append(inGo, n)
	}
	sort.Strings(inC)
	sort.Strings(inGo)
	require.Equal(t, inHeader, inC, "kernels/internal/cabi must list every struct of params.h")
	require.Equal(t, inHeader, inGo, "params.go must mirror every struct of params.h")

	for _, c := range structs {
		g := mirrors[c.Name]
		t.Run(c.Name, func(t *testing.T) {
			assert.Equal(t, c.Size, g.Size(), "sizeof(%s)", c.Name)
			require.Equal(t, len(c.Fields), g.NumField(), "fields of %s", c.Name)
			for i, cf := range c.Fields {
				gf := g.Field(i)
				assert.Equal(t, strings.ToUpper(cf.Name[:1])+cf.Name[1:], gf.Name, "%s field %d", c.Name, i)
				assert.Equal(t, cf.Offset, gf.Offset, "offsetof(%s, %s)", c.Name, cf.Name)
				assert.Equal(t, cf.Size, gf.Type.Size(), "sizeof %s.%s", c.Name, cf.Name)
				assert.Equal(t, cf.Kind, gf.Type.Kind(), "kind of %s.%s", c.Name, cf.Name)
			}
		})
	}
}
