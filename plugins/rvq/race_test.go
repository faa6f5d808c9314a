//go:build race

package rvq

// raceEnabled reports a -race build, whose instrumentation slows the
// portable Go kernel about tenfold (assembly is not instrumented).
const raceEnabled = true
