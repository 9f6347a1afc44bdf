//go:build wasip1

package http

import (
	"runtime"
	"unsafe"

	"gantry.dev/go-sdk/internal/abi"
)

// send: the request record flattened (method, url, headers, body), then
// the address the host writes the result<response, error> to.
//
//go:wasmimport gantry:plugin/http@0.1.0 send
func hostSend(method uint32, url unsafe.Pointer, urlLen uint32, headers unsafe.Pointer, headersLen uint32, body unsafe.Pointer, bodyLen uint32, ret unsafe.Pointer)

// ret is where the host writes the result: on the heap, which does not
// move (a goroutine's stack may). The result: discriminant @0; ok: the
// response record @4 (status @4, headers @8, body @16); err: the error
// variant @4 (case @4, message @8).
var ret = new([6]uint32)

func send(r *Request) (*Response, error) {
	pairs := make([][2]string, len(r.Headers))
	for i, h := range r.Headers {
		pairs[i] = [2]string{h.Name, h.Value}
	}
	headers := abi.Pairs(pairs)
	call := abi.BeginImport()
	hostSend(uint32(r.Method),
		unsafe.Pointer(unsafe.StringData(r.URL)), uint32(len(r.URL)),
		abi.SliceAddr(headers), uint32(len(pairs)),
		abi.SliceAddr(r.Body), uint32(len(r.Body)),
		unsafe.Pointer(ret))
	runtime.KeepAlive(r)
	runtime.KeepAlive(pairs)
	runtime.KeepAlive(headers)
	resp, err := readResult(ret)
	abi.EndImport(call)
	return resp, err
}

// readResult copies the result out of the memory the host wrote it to.
func readResult(ret *[6]uint32) (*Response, error) {
	if ret[0]&0xff != 0 {
		kind := ErrorKind(ret[1] & 0xff)
		if kind >= Decode {
			kind = Host
		}
		return nil, &Error{Kind: kind, Message: string(abi.Bytes(ret[2], ret[3]))}
	}
	resp := &Response{Status: int(ret[1] & 0xffff), Body: abi.Bytes(ret[4], ret[5])}
	for _, pair := range abi.ReadPairs(ret[2], ret[3]) {
		resp.Headers = append(resp.Headers, Header{pair[0], pair[1]})
	}
	return resp, nil
}
