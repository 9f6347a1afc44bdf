//go:build !wasip1

package http

// send fails natively: only the host sends requests.
func send(*Request) (*Response, error) {
	return nil, &Error{Kind: NotGranted, Message: "outbound HTTP is only available in a component"}
}
