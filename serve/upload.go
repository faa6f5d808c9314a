package serve

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"unicode/utf8"
)

// Limits of a multipart form beyond the file and the alignment text.
const (
	maxParts      = 64      // parts of any kind
	maxFieldBytes = 4 << 10 // one field other than text
)

// form is a parsed multipart request: the file spooled to disk and the
// other fields in memory.
type form struct {
	path   string // the spooled file, "" without a file part
	name   string // the client's file name, for messages only
	size   int64
	fields map[string][]string
}

// value is the first value of field name ("" when absent).
func (f *form) value(name string) string {
	if v := f.fields[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// has reports whether the form had field name.
func (f *form) has(name string) bool { return len(f.fields[name]) > 0 }

// remove deletes the spooled file (idempotent).
func (f *form) remove() {
	if f.path != "" {
		_ = os.Remove(f.path)
		f.path = ""
	}
}

// parseForm streams r's multipart body: the "file" part goes to a new file
// in dir, at most cfg.MaxUploadBytes of it; "text" (alignments) may be a
// field or a file part of at most cfg.MaxTextBytes; every other part is a
// text field of at most maxFieldBytes. The body as a whole is bounded by
// http.MaxBytesReader, and a Content-Length above that bound is refused
// before the body is read. On an error nothing is left on disk.
func parseForm(w http.ResponseWriter, r *http.Request, cfg *Config, dir string) (*form, *apiError) {
	mt, mp, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || mp["boundary"] == "" {
		return nil, badRequest("", "invalid_content_type", "the request must be multipart/form-data with a boundary (got Content-Type %q)", clip(r.Header.Get("Content-Type"), 100))
	}
	limit := cfg.MaxUploadBytes + cfg.MaxTextBytes + fieldBudget
	if r.ContentLength > limit {
		return nil, tooLarge(cfg)
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	mr := multipart.NewReader(body, mp["boundary"])
	f := &form{fields: map[string][]string{}}
	fail := func(e *apiError) (*form, *apiError) {
		f.remove()
		return nil, e
	}
	for parts := 0; ; parts++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(readError(err, cfg))
		}
		if parts == maxParts {
			return fail(badRequest("", "too_many_parts", "the form has more than %d parts", maxParts))
		}
		name := p.FormName()
		switch {
		case name == "file":
			if p.FileName() == "" {
				return fail(badRequest("file", "invalid_type", "file must be a file upload (a part with a filename), not a text field"))
			}
			if f.path != "" {
				return fail(badRequest("file", "duplicate_field", "the form has more than one file"))
			}
			if e := f.spool(p, cfg, dir); e != nil {
				return fail(e)
			}
		case name == "text":
			v, e := readField(p, name, cfg.MaxTextBytes)
			if e != nil {
				return fail(e)
			}
			f.fields[name] = append(f.fields[name], v)
		default:
			if p.FileName() != "" {
				return fail(badRequest(name, "invalid_type", "%s must be a text field, not a file", clip(name, 64)))
			}
			v, e := readField(p, name, maxFieldBytes)
			if e != nil {
				return fail(e)
			}
			f.fields[name] = append(f.fields[name], v)
		}
		_ = p.Close()
	}
	// Read the epilogue to the body's end, so net/http starts watching the
	// connection and cancels the request's context if the client goes away.
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	return f, nil
}

// spool copies the file part to a new file in dir.
func (f *form) spool(p *multipart.Part, cfg *Config, dir string) *apiError {
	out, err := os.CreateTemp(dir, "upload-*")
	if err != nil {
		return internalError()
	}
	f.path, f.name = out.Name(), clip(p.FileName(), 128)
	n, err := io.Copy(out, io.LimitReader(p, cfg.MaxUploadBytes+1))
	if cerr := out.Close(); err == nil && cerr != nil {
		return internalError()
	}
	if err != nil {
		return readError(err, cfg)
	}
	if n > cfg.MaxUploadBytes {
		return tooLarge(cfg)
	}
	if n == 0 {
		return badRequest("file", "invalid_file", "the file is empty")
	}
	f.size = n
	return nil
}

// readField reads a text part of at most limit bytes of UTF-8.
func readField(p *multipart.Part, name string, limit int64) (string, *apiError) {
	b, err := io.ReadAll(io.LimitReader(p, limit+1))
	if err != nil {
		return "", readError(err, nil)
	}
	if int64(len(b)) > limit {
		return "", badRequest(name, "field_too_long", "field %s is longer than %d bytes", clip(name, 64), limit)
	}
	if !utf8.Valid(b) {
		return "", badRequest(name, "invalid_value", "field %s is not UTF-8 text", clip(name, 64))
	}
	return string(b), nil
}

// readError classifies an error reading the body: too large (413), cut
// short (400), or malformed multipart (400).
func readError(err error, cfg *Config) *apiError {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) && cfg != nil:
		return tooLarge(cfg)
	case errors.As(err, &mbe):
		return newError(http.StatusRequestEntityTooLarge, typeInvalidRequest, "", "request_too_large", "the request body is too large")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest("", "truncated_body", "the request body ended before the multipart form did (truncated upload)")
	default:
		return badRequest("", "invalid_multipart", "the multipart form could not be read: %s", clip(err.Error(), 200))
	}
}

func tooLarge(cfg *Config) *apiError {
	return newError(http.StatusRequestEntityTooLarge, typeInvalidRequest, "file", "file_too_large",
		"maximum upload size exceeded: the file may have at most %d bytes", cfg.MaxUploadBytes)
}

// clip shortens user-supplied s for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// isTrue parses a boolean form field the way OpenAI's clients send them.
func isTrue(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on":
		return true
	}
	return false
}
