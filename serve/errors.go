package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// apiError is an error answer, written as OpenAI writes them:
//
//	{"error": {"message": "...", "type": "invalid_request_error", "param": "file", "code": "invalid_file"}}
//
// Messages say what was wrong with the request and never carry a server
// path, a Go error chain of internal failures or a stack trace: internal
// errors are logged and answered "internal error".
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// retryAfter, when > 0, is sent as Retry-After (seconds).
	retryAfter int
}

func (e *apiError) Error() string { return e.Message }

// Error types, as OpenAI names them.
const (
	typeInvalidRequest = "invalid_request_error"
	typeServer         = "server_error"
	typeRateLimit      = "rate_limit_error"
)

func newError(status int, typ, param, code, format string, args ...any) *apiError {
	e := &apiError{status: status, Type: typ, Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return e
}

// badRequest is a 400 about param (may be "").
func badRequest(param, code, format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, typeInvalidRequest, param, code, format, args...)
}

func internalError() *apiError {
	return newError(http.StatusInternalServerError, typeServer, "", "internal_error", "internal error: the server logged the details")
}

// writeError writes e as JSON. Headers already sent cannot be taken back:
// callers write errors before any body.
func writeError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	if e.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="edge"`)
	}
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(struct {
		Error *apiError `json:"error"`
	}{e})
}
