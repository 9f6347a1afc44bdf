package abi

import (
	"runtime"
	"runtime/debug"
)

// gcPercent is the collector's setting while an export runs.
const gcPercent = 100

// Enter is called first by every export: the collector may run again
// (imports are allowed from here on).
func Enter() {
	debug.SetGCPercent(gcPercent)
}

// Leave is called last by every export, and once at start-up: the
// collector is switched off, so that nothing the Go runtime does while the
// host lowers the next call's arguments can start a collection.
func Leave() {
	debug.SetGCPercent(-1)
}

func init() {
	// Memory profiling samples allocations; nobody reads the samples in the
	// sandbox, and the sampling is runtime work cabi_realloc must not do.
	runtime.MemProfileRate = 0
	Leave()
}
