// Command openapiv2pb reads an OpenAPI v2 document as JSON on stdin and writes
// it as the gnostic protobuf kube-apiserver serves at /openapi/v2
// (application/com.github.proto-openapi.spec.v2@v1.0+protobuf), converted
// the way kube-openapi does it. Used by scripts/kube-openapi.
package main

import (
	"io"
	"os"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		panic(err)
	}
	doc, err := openapi_v2.ParseDocument(in)
	if err != nil {
		panic(err)
	}
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(doc)
	if err != nil {
		panic(err)
	}
	if _, err := os.Stdout.Write(out); err != nil {
		panic(err)
	}
}
