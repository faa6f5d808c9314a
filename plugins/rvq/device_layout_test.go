package rvq

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFragDim: the f kernels' dimension order is a permutation of each
// 256-value row, and lane (g, t)'s mma.sync A columns 2t, 2t+1, 2t+8, 2t+9
// of step s are its dimensions d .. d + 3, d = 32(s/2) + 8t + 4(s%2).
func TestFragDim(t *testing.T) {
	seen := make([]bool, fragDp)
	for c := 0; c < fragDp; c++ {
		d := fragDim(c)
		require.False(t, seen[d], "dimension %d twice", d)
		seen[d] = true
	}
	for lt := 0; lt < 4; lt++ {
		for s := 0; s < fragDp/16; s++ {
			for e, col := range []int{2 * lt, 2*lt + 1, 2*lt + 8, 2*lt + 9} {
				assert.Equal(t, 32*(s/2)+8*lt+4*(s%2)+e, fragDim(16*s+col))
			}
		}
	}
}
