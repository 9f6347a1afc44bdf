package gantry

import "errors"

// Error is a failed reconcile as the host sees it: the parent gets
// Synced=False with Reason and Message and a Warning Event, nothing is
// applied or pruned, and a Retryable error is retried with backoff.
//
// Return one from Reconcile, wrapped or not. Any other error is reported
// with the reason [ReasonFailed] and is retryable.
type Error struct {
	// Reason is CamelCase and machine-readable, e.g. "InvalidSpec".
	Reason string
	// Message says what went wrong, for people.
	Message string
	// Retryable says whether calling again with the same input may succeed.
	Retryable bool
}

// ReasonFailed is the reason of an error that is not an [*Error].
const ReasonFailed = "ReconcileFailed"

// ReasonInvalidInput is the reason of [InvalidInput] errors: the request
// did not decode into the plugin's types.
const ReasonInvalidInput = "InvalidInput"

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Permanent is an error that calling again with the same input will not fix.
func Permanent(reason, message string) *Error {
	return &Error{Reason: reason, Message: message}
}

// Retryable is an error that may go away: the host retries with backoff.
func Retryable(reason, message string) *Error {
	return &Error{Reason: reason, Message: message, Retryable: true}
}

// InvalidInput is a permanent error with the reason "InvalidInput".
func InvalidInput(message string) *Error {
	return Permanent(ReasonInvalidInput, message)
}

// Reasoned is an error that chooses the reason and retryability it is
// reported with, as gantry.dev/go-sdk/http's errors do ("HttpError").
type Reasoned interface {
	error
	Reason() string
	Retryable() bool
}

// AsError maps any error to what the host receives: the reason and
// retryability of the first [*Error] in its chain, else of the first
// [Reasoned] error, else [ReasonFailed] and retryable; and the whole
// chain's message.
func AsError(err error) Error {
	var e *Error
	if errors.As(err, &e) {
		return Error{Reason: e.Reason, Message: err.Error(), Retryable: e.Retryable}
	}
	var r Reasoned
	if errors.As(err, &r) {
		return Error{Reason: r.Reason(), Message: err.Error(), Retryable: r.Retryable()}
	}
	return Error{Reason: ReasonFailed, Message: err.Error(), Retryable: true}
}
