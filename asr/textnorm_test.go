package asr

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNumberWords(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "zero", 7: "seven", 40: "forty", 99: "ninety nine", 100: "one hundred",
		2026: "two thousand twenty six", 1_000_001: "one million one",
		999_999_999_999: "nine hundred ninety nine billion nine hundred ninety nine million nine hundred ninety nine thousand nine hundred ninety nine",
	} {
		assert.Equal(t, want, NumberWords(n), "%d", n)
	}
}

// The cases mirror models/scripts/textnorm.py's self-test, so the Go side
// normalises text exactly as the model's training text was.
func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"In 1984, it's 3-D!":  "in one thousand nine hundred eighty four it's three d",
		"'Quoted' words' end": "quoted words end",
		"1,250 people":        "one thousand two hundred fifty people",
		"It\u2019s  ok\n":     "it's ok",
		"1234567890123":       "one two three four five six seven eight nine zero one two three",
		"café déjà-vu":        "café déjà vu",
		"— ... !!":            "",
		"room 101b":           "room one hundred one b",
	} {
		assert.Equal(t, want, Normalize(in), "%q", in)
	}
}
