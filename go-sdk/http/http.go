// Package http is a typed client over the host's `http` import: outbound
// requests, for reconcile plugins whose binding grants capabilities.http.
//
//	resp, err := http.Get(service + "/v1/backups/" + name).Send()
//	if err != nil {
//		return nil, err // an *http.Error: reason HttpError, retryable where it may pass
//	}
//	var listing Listing
//	if err := resp.JSON(&listing); err != nil { ... }
//
// The host sends only to the origins the binding allows, follows redirects
// only within them, caps sizes and the number of requests, and bounds
// every request by the call's deadline; headers the binding fills from
// Secrets are added by the host and never seen here. In a shadow run (a
// new version tried beside the one in service) only GET is sent. Natively
// (go test) every request fails with [NotGranted].
//
// Only reconcile plugins may send requests: a policy or converter that
// uses this package does not build. It is named after what it does; a
// plugin that also imports net/http names one of them differently.
package http

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Method is a request method.
type Method uint8

// The methods, in the order of the WIT enum.
const (
	// MethodGet is GET, the only method a shadow run sends.
	MethodGet Method = iota
	MethodHead
	MethodPost
	MethodPut
	MethodPatch
	MethodDelete
)

var methodNames = [...]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

// String is the method's name, e.g. "GET".
func (m Method) String() string {
	if int(m) < len(methodNames) {
		return methodNames[m]
	}
	return "Method(" + strconv.Itoa(int(m)) + ")"
}

// Header is one header's name and value.
type Header struct{ Name, Value string }

// Request is one request, built up and then [Request.Send]-ed.
type Request struct {
	// Method is the method.
	Method Method
	// URL is an absolute http:// or https:// URL.
	URL string
	// Headers are the header names and values, in order.
	Headers []Header
	// Body is the body (nil for none).
	Body []byte
}

// NewRequest is a request with method to url, no headers, no body.
func NewRequest(method Method, url string) *Request {
	return &Request{Method: method, URL: url}
}

// Get is a GET request to url.
func Get(url string) *Request { return NewRequest(MethodGet, url) }

// Head is a HEAD request to url.
func Head(url string) *Request { return NewRequest(MethodHead, url) }

// Post is a POST request to url.
func Post(url string) *Request { return NewRequest(MethodPost, url) }

// Put is a PUT request to url.
func Put(url string) *Request { return NewRequest(MethodPut, url) }

// Patch is a PATCH request to url.
func Patch(url string) *Request { return NewRequest(MethodPatch, url) }

// Delete is a DELETE request to url.
func Delete(url string) *Request { return NewRequest(MethodDelete, url) }

// WithHeader adds a header.
func (r *Request) WithHeader(name, value string) *Request {
	r.Headers = append(r.Headers, Header{name, value})
	return r
}

// WithBody sets the body.
func (r *Request) WithBody(body []byte) *Request {
	r.Body = body
	return r
}

// WithJSON sets v, as JSON, as the body, and content-type
// application/json. A value that does not encode is an [InvalidRequest]
// error.
func (r *Request) WithJSON(v any) (*Request, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, &Error{Kind: InvalidRequest, Message: err.Error()}
	}
	return r.WithHeader("content-type", "application/json").WithBody(body), nil
}

// Send sends the request and waits for the whole response. The error is
// an [*Error] saying what the host reported.
func (r *Request) Send() (*Response, error) {
	if int(r.Method) >= len(methodNames) {
		return nil, &Error{Kind: InvalidRequest, Message: "unknown method " + r.Method.String()}
	}
	resp, err := send(r)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Response is a response, after any redirects.
type Response struct {
	// Status is the status code.
	Status int
	// Headers are the header names (lowercase) and values.
	Headers []Header
	// Body is the whole body.
	Body []byte
}

// Success says whether the status is 2xx.
func (r *Response) Success() bool { return r.Status >= 200 && r.Status < 300 }

// Header is the first value of header name (any case), "" when absent.
func (r *Response) Header(name string) string {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// JSON decodes the body into into; a body that does not decode is a
// [Decode] error.
func (r *Response) JSON(into any) error {
	if err := json.Unmarshal(r.Body, into); err != nil {
		return &Error{Kind: Decode, Message: err.Error()}
	}
	return nil
}
