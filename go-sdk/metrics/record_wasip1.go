//go:build wasip1

package metrics

import (
	"runtime"
	"unsafe"

	"gantry.dev/go-sdk/internal/abi"
)

// The `metrics` interface: name (pointer, length), labels (elements,
// count), value.

//go:wasmimport gantry:plugin/metrics@0.1.0 counter-add
func counterAdd(name unsafe.Pointer, nameLen uint32, labels unsafe.Pointer, labelsLen uint32, value float64)

//go:wasmimport gantry:plugin/metrics@0.1.0 gauge-set
func gaugeSet(name unsafe.Pointer, nameLen uint32, labels unsafe.Pointer, labelsLen uint32, value float64)

//go:wasmimport gantry:plugin/metrics@0.1.0 histogram-observe
func histogramObserve(name unsafe.Pointer, nameLen uint32, labels unsafe.Pointer, labelsLen uint32, value float64)

func record(k kind, name string, labels Labels, value float64) {
	elems := abi.Pairs(labels)
	namePtr := unsafe.Pointer(unsafe.StringData(name))
	send := counterAdd
	switch k {
	case gauge:
		send = gaugeSet
	case histogram:
		send = histogramObserve
	}
	send(namePtr, uint32(len(name)), abi.SliceAddr(elems), uint32(len(labels)), value)
	runtime.KeepAlive(name)
	runtime.KeepAlive(labels)
	runtime.KeepAlive(elems)
}
