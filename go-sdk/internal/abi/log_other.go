//go:build !wasip1

package abi

import (
	"fmt"
	"os"
)

var levels = [...]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}

// Log writes a line to stderr when the plugin runs natively (go test).
func Log(level uint32, message string) {
	name := "INFO"
	if int(level) < len(levels) {
		name = levels[level]
	}
	fmt.Fprintf(os.Stderr, "%s %s\n", name, message)
}
