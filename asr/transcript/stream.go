package transcript

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Writer writes a transcript in one format while it is being made: words
// given to Words are written as soon as the format allows (a line each in
// CTM and TSV, a cue once the next word ends it in SRT and VTT, the text
// word by word), and Close writes the rest. JSON, one object, is written
// whole by Close. What a Writer writes for words w and a transcript tr
// equals Write of tr when tr.Words is w (and, for Text, tr.Text their
// texts joined by spaces). A Writer is for one goroutine; it does not
// buffer: give it a bufio.Writer for many small writes.
type Writer struct {
	w      io.Writer
	f      Format
	opt    WriteOptions
	cues   cuer
	n      int // cues or words written
	clean  *strings.Replacer
	err    error
	closed bool
}

// NewWriter starts writing format f to w (VTT's and TSV's headers at once).
func NewWriter(w io.Writer, f Format, opt WriteOptions) (*Writer, error) {
	opt = opt.withDefaults()
	sw := &Writer{w: w, f: f, opt: opt, cues: cuer{opt: opt}}
	switch f {
	case Text, JSON, SRT, CTM:
	case VTT:
		sw.clean = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
		sw.write("WEBVTT\n\n")
	case TSV:
		sw.clean = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
		sw.write("start\tend\ttext\n")
	default:
		return nil, fmt.Errorf("unknown transcript format %q (want one of text, json, srt, vtt, ctm, tsv)", f)
	}
	return sw, sw.err
}

// Streams reports whether the format is written as words come (all but
// JSON).
func (sw *Writer) Streams() bool { return sw.f != JSON }

func (sw *Writer) write(s string) {
	if sw.err == nil {
		_, sw.err = io.WriteString(sw.w, s)
	}
}

// Words writes the next words (final ones, in order).
func (sw *Writer) Words(words []Word) error {
	for _, wd := range words {
		switch sw.f {
		case Text:
			if sw.n > 0 {
				sw.write(" ")
			}
			sw.write(wd.Text)
		case SRT, VTT:
			if c, ok := sw.cues.add(wd); ok {
				sw.cue(c)
			}
		case CTM:
			sw.write(fmt.Sprintf("%s %s %.3f %.3f %s %.3f\n", sw.opt.Utterance, sw.opt.Channel, wd.Start.Seconds(),
				(wd.End - wd.Start).Seconds(), strings.Join(strings.Fields(wd.Text), "_"), wd.Confidence))
		case TSV:
			sw.write(fmt.Sprintf("%d\t%d\t%s\n", wd.Start.Round(time.Millisecond).Milliseconds(),
				wd.End.Round(time.Millisecond).Milliseconds(), sw.clean.Replace(wd.Text)))
		}
		if sw.f == Text {
			sw.n++
		}
	}
	return sw.err
}

func (sw *Writer) cue(c cue) {
	sw.n++
	if sw.f == SRT {
		sw.write(fmt.Sprintf("%d\n%s --> %s\n%s\n\n", sw.n, clock(c.start, ','), clock(c.end, ','), c.text))
		return
	}
	sw.write(fmt.Sprintf("%s --> %s\n%s\n\n", clock(c.start, '.'), clock(c.end, '.'), sw.clean.Replace(c.text)))
}

// Close writes what remains: the last cue, the text's newline, or the
// whole JSON object of tr (the other formats ignore tr).
func (sw *Writer) Close(tr *Transcript) error {
	if sw.closed {
		return sw.err
	}
	sw.closed = true
	switch sw.f {
	case Text:
		sw.write("\n")
	case SRT, VTT:
		if c, ok := sw.cues.flush(); ok {
			sw.cue(c)
		}
	case JSON:
		if sw.err == nil {
			sw.err = writeJSON(sw.w, tr)
		}
	}
	return sw.err
}
