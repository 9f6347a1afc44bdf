package policy

import (
	"fmt"

	"gantry.dev/go-sdk/internal/abi"
)

// Infof writes an info line to the host's log, tagged with the policy's name.
func Infof(format string, args ...any) { abi.Log(2, fmt.Sprintf(format, args...)) }

// Warnf writes a warning line to the host's log.
func Warnf(format string, args ...any) { abi.Log(3, fmt.Sprintf(format, args...)) }
