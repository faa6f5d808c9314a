package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgespeech/edge/asr/transcript"
)

// stdinName is the input name that reads standard input.
const stdinName = "-"

// output says where each input's transcript goes. The rules (also in the
// README and the usage text):
//
//   - no --out, or --out -: standard output. One input: the format as it
//     is. Several: JSON becomes JSON Lines, one compact object per input
//     with a "file" field first (and {"file", "error"} for an input that
//     failed); the other formats put a "==> FILE <==" line before each
//     input's output.
//   - --out is a directory exactly when it ends in "/", exists as a
//     directory, or there are several inputs; it is created when missing,
//     and a non-directory in its place is a usage error. Each input writes
//     DIR/NAME.FORMAT, NAME from outputNames.
//   - otherwise --out is the one input's output file (its parent directory
//     is created).
type output struct {
	format transcript.Format
	stdout io.Writer
	dir    string            // one file per input in dir
	file   string            // the one input's file
	names  map[string]string // input -> output path (dir mode)
	many   bool              // several inputs to stdout
	first  bool              // nothing written to stdout yet
}

// planOutput resolves --out for the inputs before any work is done, so a
// wrong --out fails at once (exit 2) instead of after the first transcript.
// note gets informational messages (a directory created for several
// inputs).
func planOutput(format transcript.Format, out string, inputs []string, stdout io.Writer, note func(string)) (*output, error) {
	o := &output{format: format, stdout: stdout, first: true}
	if err := checkInputs(inputs); err != nil {
		return nil, err
	}
	if out == "" || out == "-" {
		o.many = len(inputs) > 1
		return o, nil
	}
	slash := strings.HasSuffix(out, "/") || strings.HasSuffix(out, string(os.PathSeparator))
	trimmed := strings.TrimRight(out, "/"+string(os.PathSeparator))
	if trimmed == "" {
		trimmed = string(os.PathSeparator)
	}
	st, statErr := os.Stat(trimmed)
	exists := statErr == nil
	isDir := slash || (exists && st.IsDir()) || len(inputs) > 1
	if !isDir {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return nil, err
		}
		o.file = out
		return o, nil
	}
	if exists && !st.IsDir() {
		why := "it ends in /"
		if !slash {
			why = fmt.Sprintf("%d inputs write one file each", len(inputs))
		}
		return nil, fmt.Errorf("--out %s is a file, but it must be a directory (%s): %w", out, why, errUsage)
	}
	if !exists {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, err
		}
		if !slash {
			note(fmt.Sprintf("created directory %s/ for the %d outputs (one per input)", trimmed, len(inputs)))
		}
	}
	names, err := outputNames(inputs)
	if err != nil {
		return nil, err
	}
	o.dir = out
	o.names = map[string]string{}
	for i, in := range inputs {
		o.names[in] = filepath.Join(out, names[i]+"."+string(format))
	}
	return o, nil
}

// checkInputs refuses standard input given twice (it can be read once).
func checkInputs(inputs []string) error {
	n := 0
	for _, in := range inputs {
		if in == stdinName {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("standard input (-) is given %d times; it can be read once: %w", n, errUsage)
	}
	return nil
}

// outputNames names each input's output (without the format's extension),
// relative to the output directory: the input's file name without its
// extension (a/x.wav -> x; standard input -> stdin). Inputs that would share
// a name keep the part of their directory that tells them apart (a/x.wav
// and b/x.wav -> a/x and b/x: their paths relative to their deepest common
// directory), and their extension when that is still not enough (x.wav and
// x.flac -> x.wav and x.flac). The same file given twice, or names that
// still collide, are usage errors: no output is ever overwritten by another.
func outputNames(inputs []string) ([]string, error) {
	abs := make([]string, len(inputs))
	seen := map[string]string{}
	for i, in := range inputs {
		if in == stdinName {
			abs[i] = stdinName
			continue
		}
		a, err := filepath.Abs(in)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[a]; dup {
			return nil, fmt.Errorf("%s and %s are the same file: %w", prev, in, errUsage)
		}
		seen[a], abs[i] = in, a
	}
	stem := func(p string) string {
		if p == stdinName {
			return "stdin"
		}
		b := filepath.Base(p)
		return strings.TrimSuffix(b, filepath.Ext(b))
	}
	groups := map[string][]int{}
	for i, a := range abs {
		groups[stem(a)] = append(groups[stem(a)], i)
	}
	names := make([]string, len(inputs))
	for s, idx := range groups {
		if len(idx) == 1 {
			names[idx[0]] = s
			continue
		}
		var dirs []string
		for _, i := range idx {
			if abs[i] != stdinName {
				dirs = append(dirs, filepath.Dir(abs[i]))
			}
		}
		common := commonDir(dirs)
		rel := map[int]string{}
		count := map[string]int{}
		for _, i := range idx {
			r := "stdin"
			if abs[i] != stdinName {
				r, _ = filepath.Rel(common, abs[i])
				r = strings.TrimSuffix(r, filepath.Ext(r))
			}
			rel[i] = r
			count[r]++
		}
		for _, i := range idx {
			names[i] = rel[i]
			if count[rel[i]] > 1 && abs[i] != stdinName {
				r, _ := filepath.Rel(common, abs[i])
				names[i] = r
			}
		}
	}
	byName := map[string]string{}
	for i, n := range names {
		if prev, dup := byName[n]; dup {
			return nil, fmt.Errorf("%s and %s would both write %s; rename one or transcribe them separately: %w", prev, inputs[i], n, errUsage)
		}
		byName[n] = inputs[i]
	}
	return names, nil
}

// commonDir is the deepest directory containing every dir (absolute,
// cleaned paths).
func commonDir(dirs []string) string {
	if len(dirs) == 0 {
		return "."
	}
	sort.Strings(dirs)
	a, b := strings.Split(dirs[0], string(os.PathSeparator)), strings.Split(dirs[len(dirs)-1], string(os.PathSeparator))
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	c := strings.Join(a[:n], string(os.PathSeparator))
	if c == "" {
		return string(os.PathSeparator)
	}
	return c
}

// displayName is how an input is named in output and messages.
func displayName(input string) string {
	if input == stdinName {
		return "stdin"
	}
	return input
}

func (o *output) writeOptions(input string) transcript.WriteOptions {
	name := "stdin"
	if input != stdinName {
		b := filepath.Base(input)
		name = strings.TrimSuffix(b, filepath.Ext(b))
	}
	return transcript.WriteOptions{Utterance: name}
}

// write sends one input's transcript where it goes.
func (o *output) write(input string, tr *transcript.Transcript) error {
	opt := o.writeOptions(input)
	switch {
	case o.dir != "":
		return writeFile(o.names[input], func(w io.Writer) error { return transcript.Write(w, tr, o.format, opt) })
	case o.file != "":
		return writeFile(o.file, func(w io.Writer) error { return transcript.Write(w, tr, o.format, opt) })
	case !o.many:
		return transcript.Write(o.stdout, tr, o.format, opt)
	case o.format == transcript.JSON:
		var buf bytes.Buffer
		if err := transcript.Write(&buf, tr, o.format, opt); err != nil {
			return err
		}
		return o.jsonLine(input, buf.Bytes())
	default:
		var buf bytes.Buffer
		if err := transcript.Write(&buf, tr, o.format, opt); err != nil {
			return err
		}
		sep := ""
		if !o.first {
			sep = "\n"
		}
		o.first = false
		_, err := fmt.Fprintf(o.stdout, "%s==> %s <==\n%s", sep, displayName(input), buf.Bytes())
		return err
	}
}

// writeError records a failed input in JSON Lines output (elsewhere the
// failure is on stderr only).
func (o *output) writeError(input string, failure error) error {
	if !o.many || o.format != transcript.JSON || o.dir != "" || o.file != "" {
		return nil
	}
	b, err := json.Marshal(struct {
		Error string `json:"error"`
	}{failure.Error()})
	if err != nil {
		return err
	}
	return o.jsonLine(input, b)
}

// jsonLine writes obj (a JSON object) compacted, with "file" as its first
// field, and a newline.
func (o *output) jsonLine(input string, obj []byte) error {
	var c bytes.Buffer
	if err := json.Compact(&c, obj); err != nil {
		return err
	}
	body := bytes.TrimSpace(c.Bytes())
	if len(body) < 2 || body[0] != '{' {
		return fmt.Errorf("JSON output of %s is not an object", displayName(input))
	}
	file, _ := json.Marshal(displayName(input))
	line := []byte(`{"file":`)
	line = append(line, file...)
	if len(body) > 2 {
		line = append(line, ',')
	}
	line = append(line, body[1:]...)
	line = append(line, '\n')
	_, err := o.stdout.Write(line)
	return err
}

func writeFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// outStream is one input's output while the input is transcribed: the
// words of formats that allow it are written as they become final (to a
// file, as FILE.part until the transcript is complete); JSON is written
// whole at the end.
type outStream struct {
	o     *output
	input string
	sw    *transcript.Writer
	bw    *bufio.Writer
	file  *os.File      // the .part file being written, or nil
	path  string        // its final name
	buf   *bytes.Buffer // JSON Lines: the object, written at close
	wrote bool          // words were written
}

// open starts the output of input (see output for where it goes).
func (o *output) open(input string) (*outStream, error) {
	s := &outStream{o: o, input: input}
	if o.format == transcript.JSON {
		return s, nil // written whole by close
	}
	var w io.Writer = o.stdout
	switch {
	case o.dir != "" || o.file != "":
		s.path = o.file
		if o.dir != "" {
			s.path = o.names[input]
		}
		if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
			return nil, err
		}
		f, err := os.Create(s.path + ".part")
		if err != nil {
			return nil, err
		}
		s.file, w = f, f
	case o.many:
		sep := ""
		if !o.first {
			sep = "\n"
		}
		o.first = false
		if _, err := fmt.Fprintf(o.stdout, "%s==> %s <==\n", sep, displayName(input)); err != nil {
			return nil, err
		}
	}
	s.bw = bufio.NewWriter(w)
	sw, err := transcript.NewWriter(s.bw, o.format, o.writeOptions(input))
	if err != nil {
		s.discard()
		return nil, err
	}
	s.sw = sw
	return s, nil
}

// streams reports whether words are written as they come (all formats but
// JSON), so the transcript need not keep them.
func (s *outStream) streams() bool { return s.sw != nil }

// words writes final words, flushed at once.
func (s *outStream) words(ws []transcript.Word) error {
	if s.sw == nil {
		return nil
	}
	s.wrote = true
	if err := s.sw.Words(ws); err != nil {
		return err
	}
	return s.bw.Flush()
}

// close completes the output with the transcript (all of it for JSON; for
// the other formats only what follows the words already written).
func (s *outStream) close(tr *transcript.Transcript) error {
	if s.sw == nil {
		return s.o.write(s.input, tr)
	}
	if !s.wrote && len(tr.Words) > 0 {
		if err := s.sw.Words(tr.Words); err != nil {
			s.discard()
			return err
		}
	}
	err := s.sw.Close(tr)
	if err == nil {
		err = s.bw.Flush()
	}
	if s.file == nil {
		return err
	}
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	s.file = nil
	if err != nil {
		return err
	}
	return os.Rename(s.path+".part", s.path)
}

// fail ends the output of an input that failed: a file keeps what was
// written as FILE.part (removed when it holds no words), JSON Lines get the
// error object.
func (s *outStream) fail(failure error) error {
	if s.sw != nil && s.bw != nil {
		_ = s.bw.Flush()
	}
	if s.file != nil {
		_ = s.file.Close()
		if !s.wrote {
			_ = os.Remove(s.path + ".part")
		}
		s.file = nil
	}
	return s.o.writeError(s.input, failure)
}

// discard drops a file output that could not be started.
func (s *outStream) discard() {
	if s.file != nil {
		_ = s.file.Close()
		_ = os.Remove(s.path + ".part")
		s.file = nil
	}
}
