package amqp

import "fmt"

// The Go types of AMQP values that have no natural Go type. Decoding
// yields: nil (null), bool, uint8 (ubyte), uint16, uint32, uint64, int8
// (byte), int16, int32, int64, float32, float64, Char, time.Time
// (timestamp, UTC, milliseconds), UUID, []byte (binary), string, Symbol,
// []any (list), map[any]any (map), Array and Described.

// Symbol is an AMQP symbol: an ASCII name, distinct from a string on the
// wire.
type Symbol string

// UUID is an AMQP uuid in RFC 4122 byte order.
type UUID [16]byte

func (u UUID) String() string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Char is an AMQP char: one UTF-32 code point.
type Char rune

// Array is an AMQP array: elements that share one type. Encoding takes
// the type of the first element; an empty Array encodes as an array of
// nulls.
type Array []any

// Described is a value with a descriptor (an uint64 code or a Symbol),
// the way AMQP composite types and extensions are carried.
type Described struct {
	Descriptor any
	Value      any
}
