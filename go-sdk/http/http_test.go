package http

import (
	"errors"
	"strings"
	"testing"
)

func TestTheBuilderFillsTheRequest(t *testing.T) {
	r, err := Post("http://127.0.0.1:8080/v1").WithHeader("x-a", "1").WithJSON(map[string]int{"n": 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != MethodPost || r.URL != "http://127.0.0.1:8080/v1" || string(r.Body) != `{"n":2}` {
		t.Fatalf("%+v", r)
	}
	if len(r.Headers) != 2 || r.Headers[0] != (Header{"x-a", "1"}) || r.Headers[1] != (Header{"content-type", "application/json"}) {
		t.Fatalf("headers %v", r.Headers)
	}
	if _, err := Put("u").WithJSON(func() {}); !isKind(err, InvalidRequest) {
		t.Fatalf("got %v", err)
	}
	for m, name := range map[Method]string{MethodGet: "GET", MethodHead: "HEAD", MethodPatch: "PATCH", MethodDelete: "DELETE", 9: "Method(9)"} {
		if m.String() != name {
			t.Errorf("%d: %s", m, m)
		}
	}
}

func TestNativelyRequestsAreNotGrantedAndBadMethodsAreRefused(t *testing.T) {
	_, err := Get("http://127.0.0.1:1").Send()
	if !isKind(err, NotGranted) || err.Error() != "HTTP not granted: outbound HTTP is only available in a component" {
		t.Fatalf("got %v", err)
	}
	if _, err := NewRequest(Method(6), "http://x").Send(); !isKind(err, InvalidRequest) || !strings.Contains(err.Error(), "unknown method Method(6)") {
		t.Fatalf("got %v", err)
	}
}

func TestErrorsSayWhetherTheyMayPassLater(t *testing.T) {
	retryable := map[ErrorKind]bool{Timeout: true, Transport: true, Host: true, TooManyRequests: true}
	for k := NotGranted; k <= Decode; k++ {
		e := &Error{Kind: k, Message: "m"}
		if e.Retryable() != retryable[k] || e.Reason() != "HttpError" || e.Error() != "HTTP "+k.String()+": m" {
			t.Errorf("%v: retryable %v, %q", k, e.Retryable(), e.Error())
		}
	}
	if (&Error{Kind: NotAllowed, Message: "http://x is not in the binding's allow list"}).Error() != "HTTP not allowed: http://x is not in the binding's allow list" {
		t.Fatal("the message is not the host's")
	}
}

func TestResponseHelpers(t *testing.T) {
	r := &Response{Status: 204, Headers: []Header{{"content-type", "a"}, {"content-type", "b"}}, Body: []byte(`{"backups":3}`)}
	if !r.Success() || (&Response{Status: 302}).Success() {
		t.Fatal("Success")
	}
	if r.Header("Content-Type") != "a" || r.Header("x") != "" {
		t.Fatal("Header")
	}
	var listing struct{ Backups int }
	if err := r.JSON(&listing); err != nil || listing.Backups != 3 {
		t.Fatalf("%v %v", listing, err)
	}
	if err := (&Response{Body: []byte("<html>")}).JSON(&listing); !isKind(err, Decode) {
		t.Fatalf("got %v", err)
	}
}

func isKind(err error, kind ErrorKind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == kind
}
