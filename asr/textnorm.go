package asr

import (
	"regexp"
	"strings"
	"unicode"
)

var (
	ones = strings.Fields("zero one two three four five six seven eight nine ten eleven twelve thirteen " +
		"fourteen fifteen sixteen seventeen eighteen nineteen")
	tens   = strings.Fields("_ _ twenty thirty forty fifty sixty seventy eighty ninety")
	scales = []struct {
		value uint64
		name  string
	}{{1e9, "billion"}, {1e6, "million"}, {1e3, "thousand"}}
)

// NumberWords spells a non-negative integer below 10^12 in American English
// without "and": 2026 -> "two thousand twenty six". It is the spelling the
// bundled model was trained on (models/scripts/textnorm.py).
func NumberWords(n uint64) string {
	switch {
	case n < 20:
		return ones[n]
	case n < 100:
		s := tens[n/10]
		if n%10 != 0 {
			s += " " + ones[n%10]
		}
		return s
	case n < 1000:
		s := ones[n/100] + " hundred"
		if n%100 != 0 {
			s += " " + NumberWords(n%100)
		}
		return s
	}
	for _, sc := range scales {
		if n >= sc.value {
			s := NumberWords(n/sc.value) + " " + sc.name
			if n%sc.value != 0 {
				s += " " + NumberWords(n%sc.value)
			}
			return s
		}
	}
	panic("unreachable")
}

// numberRe matches digit runs, with thousands separators ("1,250").
var numberRe = regexp.MustCompile(`\d{1,3}(?:,\d{3})+\b|\d+`)

// spellNumbers replaces every digit run by its words, surrounded by spaces.
// Runs longer than 12 digits are read digit by digit.
func spellNumbers(s string) string {
	return numberRe.ReplaceAllStringFunc(s, func(m string) string {
		digits := strings.ReplaceAll(m, ",", "")
		if len(digits) > 12 {
			words := make([]string, len(digits))
			for i, c := range digits {
				words[i] = ones[c-'0']
			}
			return " " + strings.Join(words, " ") + " "
		}
		var n uint64
		for _, c := range digits {
			n = n*10 + uint64(c-'0')
		}
		return " " + NumberWords(n) + " "
	})
}

// Normalize reduces text to what a character CTC model hears, as the bundled
// model's training text was: lower case, digits spelled out, punctuation and
// symbols turned into word breaks, apostrophes kept only inside words, words
// separated by one space. Letters outside the model's alphabet are kept here;
// the aligner maps them to the wildcard token.
//
//	Normalize("In 1984, it's 3-D!") == "in one thousand nine hundred eighty four it's three d"
func Normalize(text string) string {
	return strings.Join(normalizeWord(text), " ")
}

// normalizeWord normalises one piece of text into zero or more words.
func normalizeWord(text string) []string {
	return normalizeCase(strings.ToLower(text))
}

// normalizeKeepCase is Normalize's word splitting without lower-casing,
// for cased vocabularies.
func normalizeKeepCase(text string) []string { return normalizeCase(text) }

func normalizeCase(text string) []string {
	t := strings.ReplaceAll(text, "\u2019", "'")
	t = spellNumbers(t)
	t = strings.Map(func(r rune) rune {
		if r == '\'' || unicode.IsLetter(r) || unicode.IsMark(r) {
			return r
		}
		return ' '
	}, t)
	var words []string
	for _, w := range strings.Fields(t) {
		w = strings.Trim(w, "'") // quotes, not apostrophes inside words
		if w != "" {
			words = append(words, w)
		}
	}
	return words
}
