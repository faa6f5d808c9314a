//go:build !kernels_external

package kernels

import _ "embed"

//go:embed edge.fatbin
var fatbin []byte
