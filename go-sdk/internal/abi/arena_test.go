package abi

import (
	"testing"
	"unsafe"
)

func TestAllocationsAreAlignedAndDisjoint(t *testing.T) {
	a := NewArena(1 << 10)
	type block struct{ start, end uintptr }
	var blocks []block
	for i, size := range []uintptr{1, 8, 3, 76, 0, 12, 5, 200} {
		align := uintptr(1) << (i % 4)
		p := uintptr(a.Alloc(size, align))
		if p%align != 0 {
			t.Fatalf("block %d at %#x is not aligned to %d", i, p, align)
		}
		for _, b := range blocks {
			if size > 0 && p < b.end && b.start < p+size {
				t.Fatalf("block %d [%#x,%#x) overlaps [%#x,%#x)", i, p, p+size, b.start, b.end)
			}
		}
		blocks = append(blocks, block{p, p + size})
	}
}

func TestTheFirstChunkServesWithoutTheGoAllocator(t *testing.T) {
	a := NewArena(1 << 20)
	allocs := testing.AllocsPerRun(100, func() {
		a.Reset()
		for i := 0; i < 1000; i++ {
			a.Realloc(nil, 0, 4, 100)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v Go allocations per request that fits the arena, want 0", allocs)
	}
	if a.Chunks() != 1 {
		t.Fatalf("%d chunks, want 1", a.Chunks())
	}
}

func TestARequestLargerThanTheArenaGetsMoreChunksAndKeepsThem(t *testing.T) {
	a := NewArena(64)
	grown := 0
	a.grow = func(n int) []byte { grown++; return make([]byte, n) }
	first := a.Alloc(40, 8)
	second := a.Alloc(40, 8) // does not fit: a new chunk
	big := a.Alloc(1000, 4)
	if grown != 2 || a.Chunks() != 3 {
		t.Fatalf("grew %d times, %d chunks; want 2 and 3", grown, a.Chunks())
	}
	*(*byte)(first), *(*byte)(second), *(*byte)(big) = 1, 2, 3
	if *(*byte)(first) != 1 || *(*byte)(second) != 2 {
		t.Fatal("blocks overwrote each other")
	}
	a.Reset()
	a.Alloc(40, 8)
	a.Alloc(100, 8) // fits the kept second chunk (128 bytes): no growth
	if grown != 2 {
		t.Fatalf("grew again after Reset although the kept chunk fits")
	}
}

func TestReallocCopiesTheOldBlock(t *testing.T) {
	a := NewArena(256)
	p := a.Realloc(nil, 0, 1, 4)
	copy(unsafe.Slice((*byte)(p), 4), "gant")
	q := a.Realloc(p, 4, 1, 10)
	if got := string(unsafe.Slice((*byte)(q), 4)); got != "gant" {
		t.Fatalf("realloc lost the contents: %q", got)
	}
	if r := a.Realloc(q, 10, 1, 6); r != q {
		t.Fatal("shrinking moved the block")
	}
}

func TestReleaseFreesWhatCameAfterTheMark(t *testing.T) {
	a := NewArena(64)
	kept := a.Alloc(16, 8)
	*(*byte)(kept) = 7
	m := a.Mark()
	first := a.Alloc(40, 8)
	a.Alloc(100, 8) // a second chunk
	a.Release(m)
	again := a.Alloc(40, 8)
	if again != first {
		t.Fatalf("after Release the arena did not reuse the block at the mark")
	}
	if *(*byte)(kept) != 7 {
		t.Fatal("Release freed a block from before the mark")
	}
	if a.Chunks() != 2 {
		t.Fatalf("%d chunks, want the second kept", a.Chunks())
	}
}
