package http

// ErrorKind says why a request got no response.
type ErrorKind uint8

// The kinds the host reports, in the order of the WIT variant, then
// [Decode].
const (
	// NotGranted: the binding grants no HTTP capability.
	NotGranted ErrorKind = iota
	// NotAllowed: the URL, or a redirect's target, is not in the allow list.
	NotAllowed
	// ShadowRun: a shadow run does not send this method.
	ShadowRun
	// TooManyRequests: the call used up its maxRequestsPerCall.
	TooManyRequests
	// TooLarge: the request or the response body is over its cap.
	TooLarge
	// Timeout: no response within the timeout or the call's deadline.
	Timeout
	// InvalidRequest: a bad URL, method or header.
	InvalidRequest
	// Transport: connection, TLS or protocol failure, or too many redirects.
	Transport
	// Host: the host could not prepare the request (a Secret it reads).
	Host
	// Decode: the response body is not what was expected.
	Decode
)

var kindNames = [...]string{
	"not granted", "not allowed", "shadow run", "too many requests", "too large",
	"timeout", "invalid request", "transport", "host", "decode",
}

// String is the kind in words, e.g. "not allowed".
func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Error is a request that got no response, with the host's message.
//
// Returned from Reconcile, it fails the reconcile with the reason
// "HttpError", retryable when the same request may succeed later.
type Error struct {
	// Kind says why.
	Kind ErrorKind
	// Message is the host's message, e.g. that the URL is not in the
	// binding's allow list.
	Message string
}

// Error is "HTTP <kind>: <message>".
func (e *Error) Error() string { return "HTTP " + e.Kind.String() + ": " + e.Message }

// Retryable says whether the same request may succeed later: timeouts,
// transport and host failures, and a used-up request budget.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case Timeout, Transport, Host, TooManyRequests:
		return true
	}
	return false
}

// Reason is the reason a reconcile failed by this error reports.
func (e *Error) Reason() string { return "HttpError" }
