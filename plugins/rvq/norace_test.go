//go:build !race

package rvq

const raceEnabled = false
