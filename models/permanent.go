package models

import (
	"errors"
	"net/http"
)

// FailurePermanent is the failure kind (metadata failure_kind) of an
// ERROR frame that ends a response whose failure a new attempt of the
// same request would meet again: the API refused the key (401, 403), does
// not know the model or the endpoint (404, 405), or rejected the request
// itself (400, 413, 422). Consumers give up at once instead of retrying.
const FailurePermanent = "permanent"

// Permanent marks err as a failure a new attempt would meet again (see
// [FailurePermanent]); an adapter built on models/streaming then ends
// the response with an ERROR of that kind. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// PermanentStatus reports whether an HTTP error status answering a model
// request says the same request will always fail (see
// [FailurePermanent]); 408, 409, 429 and the 5xx statuses are worth
// another attempt.
func PermanentStatus(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}
