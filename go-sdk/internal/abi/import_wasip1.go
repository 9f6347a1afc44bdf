//go:build wasip1

package abi

import (
	"runtime/debug"
	"unsafe"
)

// Imports that return lists (HTTP's response) have the host write them
// into memory it asks cabi_realloc for, while the import is in progress:
// the same rule holds as when an export's arguments are lowered, so the
// collector is off from BeginImport to EndImport, and what cabi_realloc
// handed out is freed again once the caller has copied it.

// Import is an import call in progress (see BeginImport).
type Import struct {
	mark    Mark
	percent int
}

// BeginImport switches the collector off and remembers the arena's
// position, before calling an import whose results the host lowers.
func BeginImport() Import {
	return Import{mark: arena.Mark(), percent: debug.SetGCPercent(-1)}
}

// EndImport frees the import's results in the arena (copy them first)
// and puts the collector back as it was.
func EndImport(i Import) {
	arena.Release(i.mark)
	debug.SetGCPercent(i.percent)
}

// Pairs lays out a list<tuple<string, string>> for an import: its
// elements, whose address and length the import takes. They point into
// the strings: keep those alive (runtime.KeepAlive) until the import
// returns.
func Pairs(pairs [][2]string) []uint32 {
	elems := make([]uint32, 4*len(pairs))
	for i, pair := range pairs {
		elems[4*i], elems[4*i+1] = stringAddr(pair[0]), uint32(len(pair[0]))
		elems[4*i+2], elems[4*i+3] = stringAddr(pair[1]), uint32(len(pair[1]))
	}
	return elems
}

// ReadPairs reads the n elements of a list<tuple<string, string>> at base.
func ReadPairs(base, n uint32) [][2]string {
	out := make([][2]string, n)
	for i := range n {
		e := base + 16*i
		out[i] = [2]string{string(Bytes(U32(e), U32(e+4))), string(Bytes(U32(e+8), U32(e+12)))}
	}
	return out
}

// SliceAddr is the address of a slice's bytes (0 when empty), for an
// import's arguments.
func SliceAddr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(s))
}

func stringAddr(s string) uint32 {
	if len(s) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s))))
}
