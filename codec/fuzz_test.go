package codec

import (
	"os"
	"testing"
)

// FuzzSafetensors feeds arbitrary bytes to the parser: it must return an
// error or tensors whose bytes lie inside the input, never panic.
func FuzzSafetensors(f *testing.F) {
	if b, err := os.ReadFile(encodecDir + "/" + WeightsFile); err == nil {
		f.Add(b[:min(len(b), 4096)])
	}
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Add([]byte(`\x40\x00\x00\x00\x00\x00\x00\x00{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}    abcd`))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseSafetensors(b)
		if err != nil {
			return
		}
		for name, ts := range st {
			n := dtypeSize[ts.DType]
			for _, d := range ts.Shape {
				n *= d
			}
			if n != len(ts.data) {
				t.Fatalf("%q: %d bytes for %s%v", name, len(ts.data), ts.DType, ts.Shape)
			}
			if ts.DType == "F32" {
				if _, _, err := st.f32(name, ts.Shape...); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
