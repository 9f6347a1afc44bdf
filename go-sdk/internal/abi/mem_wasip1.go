//go:build wasip1

package abi

import (
	"unsafe"
)

// arena serves cabi_realloc; reserved while the module initializes.
var arena = NewArena(FirstChunk)

// adapterHeap is memory for the WASI preview 1 adapter that `gantry plugin
// build` links in: its state and its stack. The adapter allocates them on
// the first WASI call, which the Go runtime makes while it starts, before
// any Go function may be called, and memory.grow behind the Go runtime's
// back would hand the same pages to Go's heap. So the build finds this
// array in the module's data by its header and adds a small allocator over
// it, exported as cabi_realloc_adapter, which the adapter then uses. The
// header makes the array initialized data (not bss) with a known content;
// Go never reads or writes the rest.
var adapterHeap = [AdapterHeapSize]byte{
	'g', 'a', 'n', 't', 'r', 'y', ':', 'w', 'a', 's', 'i', '-', 'a', 'd', 'a', 'p',
	't', 'e', 'r', '-', 'h', 'e', 'a', 'p', ':', 'v', '1', 0,
}

// AdapterHeapSize is the size of the adapter's memory, header included.
const AdapterHeapSize = 256 << 10

func init() {
	// Referenced, so that the linker keeps it.
	if adapterHeap[0] != 'g' {
		panic("gantry: the WASI adapter's memory was overwritten")
	}
}

// keep holds what a call's results point at until the host has read them.
var keep []any

//go:wasmexport cabi_realloc
func cabiRealloc(oldPtr, oldSize, align, newSize uint32) uint32 {
	return uint32(uintptr(arena.Realloc(ptr(oldPtr), uintptr(oldSize), uintptr(align), uintptr(newSize))))
}

// PostReturn frees what the last call used: its arguments in the arena and
// its results. Called from the exports' cabi_post_* functions.
func PostReturn() {
	arena.Reset()
	clear(keep)
	keep = keep[:0]
}

// ptr is linear memory address p as a pointer (nil for 0). Addresses the
// host hands over are not Go pointers; unsafe.Add from nil says so to vet.
func ptr(p uint32) unsafe.Pointer {
	if p == 0 {
		return nil
	}
	return unsafe.Add(nil, uintptr(p))
}

// U8 reads the byte at p.
func U8(p uint32) uint8 { return *(*uint8)(ptr(p)) }

// U32 reads the little-endian u32 at p.
func U32(p uint32) uint32 { return *(*uint32)(ptr(p)) }

// Bytes copies the len bytes at p into the Go heap.
func Bytes(p, n uint32) []byte {
	if n == 0 {
		return []byte{}
	}
	out := make([]byte, n)
	copy(out, unsafe.Slice((*byte)(ptr(p)), n))
	return out
}

// String reads a canonical ABI string (pointer, length) stored at p.
func String(p uint32) string { return string(Bytes(U32(p), U32(p+4))) }

// StringList reads a list<string> stored at p.
func StringList(p uint32) [][]byte { return Strings(U32(p), U32(p+4)) }

// Strings reads the n strings of a list<string> whose elements are at base.
func Strings(base, n uint32) [][]byte {
	out := make([][]byte, n)
	for i := range n {
		e := base + 8*i
		out[i] = Bytes(U32(e), U32(e+4))
	}
	return out
}

// Out is memory being written for the host: a return area or a list's
// elements, kept alive until PostReturn.
type Out struct{ base uint32 }

// NewOut allocates size bytes aligned to 8 for results.
func NewOut(size int) Out {
	words := make([]uint64, (size+7)/8)
	keep = append(keep, words)
	return Out{uint32(uintptr(unsafe.Pointer(unsafe.SliceData(words))))}
}

// Addr is the address of the memory.
func (o Out) Addr() uint32 { return o.base }

// At is the memory from offset off on.
func (o Out) At(off uint32) Out { return Out{o.base + off} }

// U8 writes a byte at off.
func (o Out) U8(off uint32, v uint8) { *(*uint8)(ptr(o.base + off)) = v }

// U16 writes a u16 at off.
func (o Out) U16(off uint32, v uint16) { *(*uint16)(ptr(o.base + off)) = v }

// U32 writes a u32 at off.
func (o Out) U32(off uint32, v uint32) { *(*uint32)(ptr(o.base + off)) = v }

// U64 writes a u64 at off.
func (o Out) U64(off uint32, v uint64) { *(*uint64)(ptr(o.base + off)) = v }

// Bool writes a bool at off.
func (o Out) Bool(off uint32, v bool) {
	var b uint8
	if v {
		b = 1
	}
	o.U8(off, b)
}

// String writes a string (pointer, length) at off; the bytes stay alive
// until PostReturn.
func (o Out) String(off uint32, s []byte) {
	keep = append(keep, s)
	var p uint32
	if len(s) > 0 {
		p = uint32(uintptr(unsafe.Pointer(unsafe.SliceData(s))))
	}
	o.U32(off, p)
	o.U32(off+4, uint32(len(s)))
}

// List writes a list of n elements of size bytes each at off, and returns
// the memory of the elements to fill.
func (o Out) List(off uint32, n, size int) Out {
	elems := NewOut(n * size)
	o.U32(off, elems.base)
	o.U32(off+4, uint32(n))
	return elems
}

//go:wasmimport gantry:plugin/host@0.1.0 log
func hostLog(level uint32, ptr unsafe.Pointer, n uint32)

// Log writes a line to the host's log at level (0 trace ... 4 error).
func Log(level uint32, message string) {
	hostLog(level, unsafe.Pointer(unsafe.StringData(message)), uint32(len(message)))
}

// RawString reads a string stored at p, as bytes.
func RawString(p uint32) []byte { return Bytes(U32(p), U32(p+4)) }

// ResultString writes a result<_, string> (tag @0, string @4) for err and
// returns its address.
func ResultString(err error) uint32 {
	ret := NewOut(12)
	if err != nil {
		ret.U8(0, 1)
		ret.String(4, []byte(err.Error()))
	}
	return ret.Addr()
}
