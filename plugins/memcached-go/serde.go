package main

// Decoding with serde's rules and messages, for the few types the plugin
// reads, so that its errors are word for word those of the Rust plugin
// (host/tests/polyglot.rs compares them). A Go plugin of your own does not
// need this: encoding/json's messages are fine.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// invalid is a value that does not deserialize; the message is serde's.
type invalid struct{ message string }

func (e *invalid) Error() string { return e.message }

func invalidf(format string, args ...any) error {
	return &invalid{fmt.Sprintf(format, args...)}
}

// parse reads raw JSON keeping numbers as written.
func parse(raw []byte) (any, error) {
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		return nil, err
	}
	return value, nil
}

// unexpected is how serde names a JSON value it did not expect.
func unexpected(value any) string {
	switch v := value.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean `%t`", v)
	case json.Number:
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return fmt.Sprintf("integer `%s`", v)
		}
		if _, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return fmt.Sprintf("integer `%s`", v)
		}
		f, _ := v.Float64()
		text := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(text, ".eEn") {
			text += ".0"
		}
		return fmt.Sprintf("floating point `%s`", text)
	case string:
		return "string " + strconv.Quote(v)
	case []any:
		return "sequence"
	default:
		return "map"
	}
}

func invalidType(value any, expected string) error {
	return invalidf("invalid type: %s, expected %s", unexpected(value), expected)
}

// i32 is serde's i32: an integer that fits.
func i32(value any) (int32, error) {
	n, ok := value.(json.Number)
	if !ok {
		return 0, invalidType(value, "i32")
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		if _, uerr := strconv.ParseUint(string(n), 10, 64); uerr == nil {
			return 0, invalidf("invalid value: integer `%s`, expected i32", n)
		}
		return 0, invalidType(value, "i32")
	}
	if i < math.MinInt32 || i > math.MaxInt32 {
		return 0, invalidf("invalid value: integer `%d`, expected i32", i)
	}
	return int32(i), nil
}

// optionalString is serde's Option<String>.
func optionalString(value any) (*string, error) {
	switch v := value.(type) {
	case nil:
		return nil, nil
	case string:
		return &v, nil
	}
	return nil, invalidType(value, "a string")
}

// blank is Rust's `str::trim(s).is_empty()`: Unicode white space only.
func blank(s string) bool {
	return strings.TrimFunc(s, unicode.IsSpace) == ""
}
