// Package abi is the canonical ABI plumbing shared by the reconciler and
// policy exports: the memory the host writes a call's arguments into
// (cabi_realloc), reading and writing linear memory, and the host's log
// import.
//
// # Why an arena
//
// Before the host calls an export, it copies the arguments into the
// instance's memory, asking cabi_realloc for room for each string and
// list. The component model forbids the instance to call out of itself
// (any import) while that happens. Memory from the Go heap can start a
// garbage collection, and the collector reads the clock through a WASI
// import: the host then traps with "cannot leave component instance".
// So cabi_realloc bump-allocates from an arena reserved while the module
// initializes (when imports are allowed), and never calls the Go
// allocator while the arena has room. A request larger than the arena
// gets more chunks from the Go heap, but with the collector switched off
// (see [Leave]), so no collection can start: the collector runs only
// while an export's own code runs, between [Enter] and [Leave].
package abi

import "unsafe"

// FirstChunk is the size of the arena reserved at start-up: requests up to
// about this size never touch the Go allocator while they are lowered.
const FirstChunk = 4 << 20

// maxChunks bounds the chunk list, which is allocated up front so that
// growing the arena never grows a slice.
const maxChunks = 64

// Arena is a bump allocator over chunks of memory that stay alive (the
// chunks are referenced from here) until Reset.
type Arena struct {
	chunks [][]byte
	cur    int
	used   int
	// grow allocates a new chunk of at least n bytes; replaceable in tests.
	grow func(n int) []byte
}

// NewArena returns an arena whose first chunk has size bytes.
func NewArena(size int) *Arena {
	a := &Arena{chunks: make([][]byte, 1, maxChunks), grow: func(n int) []byte { return make([]byte, n) }}
	a.chunks[0] = make([]byte, size)
	return a
}

// Alloc returns size bytes aligned to align (a power of two), zero or
// not: the host overwrites them. It allocates from the Go heap only when
// the current chunk is full.
func (a *Arena) Alloc(size, align uintptr) unsafe.Pointer {
	if align == 0 {
		align = 1
	}
	if size == 0 {
		// A zero-sized block still needs a valid, aligned address of its own.
		size = 1
	}
	for {
		chunk := a.chunks[a.cur]
		base := uintptr(unsafe.Pointer(unsafe.SliceData(chunk)))
		start := (base + uintptr(a.used) + align - 1) &^ (align - 1)
		end := start + size
		if end <= base+uintptr(len(chunk)) {
			a.used = int(end - base)
			return unsafe.Add(unsafe.Pointer(unsafe.SliceData(chunk)), start-base)
		}
		if a.cur+1 < len(a.chunks) && uintptr(len(a.chunks[a.cur+1])) >= size+align {
			a.cur++
			a.used = 0
			continue
		}
		n := len(chunk) * 2
		if need := int(size + align); n < need {
			n = need
		}
		if len(a.chunks) == cap(a.chunks) {
			// Out of chunk slots: make the last one big enough instead.
			a.chunks[len(a.chunks)-1] = a.grow(n)
			a.cur = len(a.chunks) - 1
		} else {
			a.chunks = a.chunks[:a.cur+2]
			a.chunks[a.cur+1] = a.grow(n)
			a.cur++
		}
		a.used = 0
	}
}

// Realloc implements cabi_realloc's contract on the arena: a fresh block
// when oldPtr is nil, else the old block when it is big enough, or a copy.
func (a *Arena) Realloc(oldPtr unsafe.Pointer, oldSize, align, newSize uintptr) unsafe.Pointer {
	if oldPtr != nil && newSize <= oldSize {
		return oldPtr
	}
	p := a.Alloc(newSize, align)
	if oldPtr != nil && oldSize > 0 {
		copy(unsafe.Slice((*byte)(p), oldSize), unsafe.Slice((*byte)(oldPtr), oldSize))
	}
	return p
}

// Reset makes the whole arena free again (after a call's results have been
// read by the host). Chunks beyond the first are kept for the next call.
func (a *Arena) Reset() {
	a.cur = 0
	a.used = 0
}

// Mark is a position in an arena, to free back to with Release.
type Mark struct{ cur, used int }

// Mark is the arena's current position.
func (a *Arena) Mark() Mark { return Mark{a.cur, a.used} }

// Release frees what was allocated since m (an import's results, once
// copied out), keeping the chunks.
func (a *Arena) Release(m Mark) {
	a.cur = m.cur
	if a.used = m.used; a.used > len(a.chunks[a.cur]) {
		a.used = len(a.chunks[a.cur])
	}
}

// Chunks is how many chunks the arena has (for tests).
func (a *Arena) Chunks() int { return len(a.chunks) }
