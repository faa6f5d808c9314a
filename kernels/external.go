//go:build kernels_external

package kernels

// Built with -tags kernels_external the binary embeds no fatbin (12 MB
// less to ship to a GPU host that has the repository's kernels/edge.fatbin
// already) and Fatbin needs $EDGE_KERNELS_FATBIN.
var fatbin []byte
