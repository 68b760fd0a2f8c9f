package amqp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"
)

// ErrMalformed is wrapped by every decoding error: the bytes are not a
// valid AMQP encoding.
var ErrMalformed = errors.New("amqp: malformed encoding")

// maxDepth bounds the nesting of lists, maps, arrays and descriptors, so
// that hostile input cannot exhaust the stack.
const maxDepth = 64

// Unmarshal decodes one AMQP value from b and returns it with the number
// of bytes it took.
func Unmarshal(b []byte) (any, int, error) {
	d := decoder{buf: b}
	v, err := d.value(0)
	if err != nil {
		return nil, 0, err
	}
	return v, d.off, nil
}

type decoder struct {
	buf []byte
	off int
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

func (d *decoder) need(n int) ([]byte, error) {
	if n < 0 || len(d.buf)-d.off < n {
		return nil, malformed("%d bytes needed at offset %d, %d left", n, d.off, len(d.buf)-d.off)
	}
	b := d.buf[d.off : d.off+n]
	d.off += n
	return b, nil
}

func (d *decoder) u8() (byte, error) {
	b, err := d.need(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (d *decoder) u16() (uint16, error) {
	b, err := d.need(2)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(b), nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.need(4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.need(8)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(b), nil
}

// value reads a constructor and the value it introduces.
func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, malformed("nested deeper than %d", maxDepth)
	}
	code, err := d.u8()
	if err != nil {
		return nil, err
	}
	if code == codeDescribed {
		desc, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		switch desc.(type) {
		case uint64, Symbol:
		default:
			return nil, malformed("descriptor of type %T", desc)
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		return Described{Descriptor: desc, Value: v}, nil
	}
	return d.body(code, depth)
}

// body reads the value of a constructor already read.
func (d *decoder) body(code byte, depth int) (any, error) {
	switch code {
	case codeNull:
		return nil, nil
	case codeTrue:
		return true, nil
	case codeFalse:
		return false, nil
	case codeBool:
		b, err := d.u8()
		if err != nil {
			return nil, err
		}
		if b > 1 {
			return nil, malformed("boolean byte %d", b)
		}
		return b == 1, nil
	case codeUbyte:
		return d.u8()
	case codeUshort:
		return d.u16()
	case codeUint:
		return d.u32()
	case codeSmallUint:
		b, err := d.u8()
		return uint32(b), err
	case codeUint0:
		return uint32(0), nil
	case codeUlong:
		return d.u64()
	case codeSmallUlong:
		b, err := d.u8()
		return uint64(b), err
	case codeUlong0:
		return uint64(0), nil
	case codeByte:
		b, err := d.u8()
		return int8(b), err
	case codeShort:
		v, err := d.u16()
		return int16(v), err
	case codeInt:
		v, err := d.u32()
		return int32(v), err
	case codeSmallInt:
		b, err := d.u8()
		return int32(int8(b)), err
	case codeLong:
		v, err := d.u64()
		return int64(v), err
	case codeSmallLong:
		b, err := d.u8()
		return int64(int8(b)), err
	case codeFloat:
		v, err := d.u32()
		return math.Float32frombits(v), err
	case codeDouble:
		v, err := d.u64()
		return math.Float64frombits(v), err
	case codeChar:
		v, err := d.u32()
		return Char(v), err
	case codeTimestamp:
		v, err := d.u64()
		return time.UnixMilli(int64(v)).UTC(), err
	case codeUUID:
		b, err := d.need(16)
		if err != nil {
			return nil, err
		}
		return UUID(b), nil
	case codeDecimal32, codeDecimal64, codeDecimal128:
		// Kept as their raw bytes: nothing here computes with decimals.
		n := map[byte]int{codeDecimal32: 4, codeDecimal64: 8, codeDecimal128: 16}[code]
		b, err := d.need(n)
		return bytes.Clone(b), err
	}
	return d.variableBody(code, depth)
}

func (d *decoder) variableBody(code byte, depth int) (any, error) {
	switch code {
	case codeVbin8, codeStr8, codeSym8, codeVbin32, codeStr32, codeSym32:
		var n int
		if code&0xf0 == 0xa0 {
			b, err := d.u8()
			if err != nil {
				return nil, err
			}
			n = int(b)
		} else {
			v, err := d.u32()
			if err != nil {
				return nil, err
			}
			n = int(v)
		}
		b, err := d.need(n)
		if err != nil {
			return nil, err
		}
		switch code {
		case codeVbin8, codeVbin32:
			return bytes.Clone(b), nil
		case codeStr8, codeStr32:
			return string(b), nil
		}
		return Symbol(b), nil
	case codeList0:
		return []any{}, nil
	case codeList8, codeList32, codeMap8, codeMap32, codeArray8, codeArray32:
		return d.compound(code, depth)
	}
	return nil, malformed("unknown type code %#x", code)
}

// compound reads a list, map or array: size, count, then the items,
// which must end exactly where the size says.
func (d *decoder) compound(code byte, depth int) (any, error) {
	var size, count int
	if code == codeList8 || code == codeMap8 || code == codeArray8 {
		s, err := d.u8()
		if err != nil {
			return nil, err
		}
		size = int(s)
		if size < 1 {
			return nil, malformed("compound size %d", size)
		}
		c, err := d.u8()
		if err != nil {
			return nil, err
		}
		count, size = int(c), size-1
	} else {
		s, err := d.u32()
		if err != nil {
			return nil, err
		}
		if s < 4 {
			return nil, malformed("compound size %d", s)
		}
		c, err := d.u32()
		if err != nil {
			return nil, err
		}
		count, size = int(c), int(s)-4
	}
	body, err := d.need(size)
	if err != nil {
		return nil, err
	}
	sub := decoder{buf: body}
	var v any
	switch code {
	case codeList8, codeList32:
		v, err = sub.listItems(count, depth)
	case codeMap8, codeMap32:
		v, err = sub.mapItems(count, depth)
	default:
		v, err = sub.arrayItems(count, depth)
	}
	if err != nil {
		return nil, err
	}
	if sub.off != len(body) {
		return nil, malformed("%d bytes left over in a compound of %d", len(body)-sub.off, len(body))
	}
	return v, nil
}

func (d *decoder) listItems(count, depth int) ([]any, error) {
	// Every item takes at least one byte: a larger count is a lie that
	// must not size an allocation.
	if count > len(d.buf) {
		return nil, malformed("list of %d items in %d bytes", count, len(d.buf))
	}
	l := make([]any, 0, count)
	for i := 0; i < count; i++ {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		l = append(l, v)
	}
	return l, nil
}

func (d *decoder) mapItems(count, depth int) (map[any]any, error) {
	if count%2 != 0 {
		return nil, malformed("map with an odd count %d", count)
	}
	if count > len(d.buf) {
		return nil, malformed("map of %d items in %d bytes", count, len(d.buf))
	}
	m := make(map[any]any, count/2)
	for i := 0; i < count; i += 2 {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if k != nil && !reflect.TypeOf(k).Comparable() {
			return nil, malformed("map key of type %T is not supported", k)
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// maxZeroWidth bounds arrays whose elements take no bytes (nulls, true),
// whose count no size can check.
const maxZeroWidth = 4096

func (d *decoder) arrayItems(count, depth int) (Array, error) {
	code, err := d.u8()
	if err != nil {
		return nil, err
	}
	var desc any
	if code == codeDescribed {
		if desc, err = d.value(depth + 1); err != nil {
			return nil, err
		}
		if code, err = d.u8(); err != nil {
			return nil, err
		}
		if code == codeDescribed {
			return nil, malformed("array element constructor described twice")
		}
	}
	if count > len(d.buf)-d.off && (count > maxZeroWidth) {
		return nil, malformed("array of %d items in %d bytes", count, len(d.buf)-d.off)
	}
	a := make(Array, 0, min(count, len(d.buf)+1))
	for i := 0; i < count; i++ {
		v, err := d.body(code, depth+1)
		if err != nil {
			return nil, err
		}
		if desc != nil {
			v = Described{Descriptor: desc, Value: v}
		}
		a = append(a, v)
	}
	return a, nil
}
