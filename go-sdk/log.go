package gantry

import (
	"fmt"

	"gantry.dev/go-sdk/internal/abi"
)

// Log levels of the host's log import.
const (
	levelTrace uint32 = iota
	levelDebug
	levelInfo
	levelWarn
	levelError
)

// Debugf writes a debug line to the host's log, tagged with the plugin's name.
func Debugf(format string, args ...any) { abi.Log(levelDebug, fmt.Sprintf(format, args...)) }

// Infof writes an info line to the host's log.
func Infof(format string, args ...any) { abi.Log(levelInfo, fmt.Sprintf(format, args...)) }

// Warnf writes a warning line to the host's log.
func Warnf(format string, args ...any) { abi.Log(levelWarn, fmt.Sprintf(format, args...)) }

// Errorf writes an error line to the host's log.
func Errorf(format string, args ...any) { abi.Log(levelError, fmt.Sprintf(format, args...)) }

// Tracef writes a trace line to the host's log.
func Tracef(format string, args ...any) { abi.Log(levelTrace, fmt.Sprintf(format, args...)) }
