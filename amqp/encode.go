package amqp

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Type codes of the AMQP 1.0 type system (part 1, section 1.6).
const (
	codeDescribed  = 0x00
	codeNull       = 0x40
	codeBool       = 0x56
	codeTrue       = 0x41
	codeFalse      = 0x42
	codeUbyte      = 0x50
	codeUshort     = 0x60
	codeUint       = 0x70
	codeSmallUint  = 0x52
	codeUint0      = 0x43
	codeUlong      = 0x80
	codeSmallUlong = 0x53
	codeUlong0     = 0x44
	codeByte       = 0x51
	codeShort      = 0x61
	codeInt        = 0x71
	codeSmallInt   = 0x54
	codeLong       = 0x81
	codeSmallLong  = 0x55
	codeFloat      = 0x72
	codeDouble     = 0x82
	codeDecimal32  = 0x74
	codeDecimal64  = 0x84
	codeDecimal128 = 0x94
	codeChar       = 0x73
	codeTimestamp  = 0x83
	codeUUID       = 0x98
	codeVbin8      = 0xa0
	codeVbin32     = 0xb0
	codeStr8       = 0xa1
	codeStr32      = 0xb1
	codeSym8       = 0xa3
	codeSym32      = 0xb3
	codeList0      = 0x45
	codeList8      = 0xc0
	codeList32     = 0xd0
	codeMap8       = 0xc1
	codeMap32      = 0xd1
	codeArray8     = 0xe0
	codeArray32    = 0xf0
)

// Marshal encodes v (of the types Unmarshal yields, plus int as long and
// map[Symbol]any / map[string]any as maps) in AMQP's type system.
func Marshal(v any) ([]byte, error) {
	var e encoder
	if err := e.value(v); err != nil {
		return nil, err
	}
	return e.buf, nil
}

type encoder struct{ buf []byte }

func (e *encoder) byte1(b byte) { e.buf = append(e.buf, b) }
func (e *encoder) u16(v uint16) { e.buf = binary.BigEndian.AppendUint16(e.buf, v) }
func (e *encoder) u32(v uint32) { e.buf = binary.BigEndian.AppendUint32(e.buf, v) }
func (e *encoder) u64(v uint64) { e.buf = binary.BigEndian.AppendUint64(e.buf, v) }

// value writes v with the most compact constructor for it.
func (e *encoder) value(v any) error {
	switch x := v.(type) {
	case nil:
		e.byte1(codeNull)
	case bool:
		if x {
			e.byte1(codeTrue)
		} else {
			e.byte1(codeFalse)
		}
	case uint8:
		e.byte1(codeUbyte)
		e.byte1(x)
	case uint16:
		e.byte1(codeUshort)
		e.u16(x)
	case uint32:
		switch {
		case x == 0:
			e.byte1(codeUint0)
		case x < 256:
			e.byte1(codeSmallUint)
			e.byte1(byte(x))
		default:
			e.byte1(codeUint)
			e.u32(x)
		}
	case uint64:
		switch {
		case x == 0:
			e.byte1(codeUlong0)
		case x < 256:
			e.byte1(codeSmallUlong)
			e.byte1(byte(x))
		default:
			e.byte1(codeUlong)
			e.u64(x)
		}
	case int8:
		e.byte1(codeByte)
		e.byte1(byte(x))
	case int16:
		e.byte1(codeShort)
		e.u16(uint16(x))
	case int32:
		if x >= -128 && x <= 127 {
			e.byte1(codeSmallInt)
			e.byte1(byte(int8(x)))
		} else {
			e.byte1(codeInt)
			e.u32(uint32(x))
		}
	case int64:
		e.long(x)
	case int:
		e.long(int64(x))
	default:
		return e.valueMore(v)
	}
	return nil
}

func (e *encoder) long(x int64) {
	if x >= -128 && x <= 127 {
		e.byte1(codeSmallLong)
		e.byte1(byte(int8(x)))
	} else {
		e.byte1(codeLong)
		e.u64(uint64(x))
	}
}

func (e *encoder) valueMore(v any) error {
	switch x := v.(type) {
	case float32:
		e.byte1(codeFloat)
		e.u32(math.Float32bits(x))
	case float64:
		e.byte1(codeDouble)
		e.u64(math.Float64bits(x))
	case Char:
		e.byte1(codeChar)
		e.u32(uint32(x))
	case time.Time:
		e.byte1(codeTimestamp)
		e.u64(uint64(x.UnixMilli()))
	case UUID:
		e.byte1(codeUUID)
		e.buf = append(e.buf, x[:]...)
	case []byte:
		e.variable(codeVbin8, codeVbin32, x)
	case string:
		e.variable(codeStr8, codeStr32, []byte(x))
	case Symbol:
		e.variable(codeSym8, codeSym32, []byte(x))
	case []any:
		return e.list(x)
	case map[any]any:
		return e.mapOf(len(x), func(f func(k, v any) error) error {
			for k, v := range x {
				if err := f(k, v); err != nil {
					return err
				}
			}
			return nil
		})
	case map[Symbol]any:
		return e.mapOf(len(x), func(f func(k, v any) error) error {
			for k, v := range x {
				if err := f(k, v); err != nil {
					return err
				}
			}
			return nil
		})
	case map[string]any:
		return e.mapOf(len(x), func(f func(k, v any) error) error {
			for k, v := range x {
				if err := f(k, v); err != nil {
					return err
				}
			}
			return nil
		})
	case Array:
		return e.array(x)
	case []Symbol:
		a := make(Array, len(x))
		for i, s := range x {
			a[i] = s
		}
		return e.array(a)
	case Described:
		e.byte1(codeDescribed)
		if err := e.value(x.Descriptor); err != nil {
			return fmt.Errorf("descriptor: %w", err)
		}
		return e.value(x.Value)
	case *Described:
		return e.value(*x)
	default:
		return fmt.Errorf("amqp: cannot encode %T", v)
	}
	return nil
}

func (e *encoder) variable(short, long byte, b []byte) {
	if len(b) < 256 {
		e.byte1(short)
		e.byte1(byte(len(b)))
	} else {
		e.byte1(long)
		e.u32(uint32(len(b)))
	}
	e.buf = append(e.buf, b...)
}

// compound writes a list or map: always the 32-bit form but for the empty
// list, which keeps the size patching simple.
func (e *encoder) compound(code byte, count int, body func() error) error {
	e.byte1(code)
	at := len(e.buf)
	e.u32(0) // size, patched below
	e.u32(uint32(count))
	if err := body(); err != nil {
		return err
	}
	binary.BigEndian.PutUint32(e.buf[at:], uint32(len(e.buf)-at-4))
	return nil
}

func (e *encoder) list(l []any) error {
	if len(l) == 0 {
		e.byte1(codeList0)
		return nil
	}
	return e.compound(codeList32, len(l), func() error {
		for i, v := range l {
			if err := e.value(v); err != nil {
				return fmt.Errorf("list item %d: %w", i, err)
			}
		}
		return nil
	})
}

func (e *encoder) mapOf(n int, each func(func(k, v any) error) error) error {
	return e.compound(codeMap32, 2*n, func() error {
		return each(func(k, v any) error {
			if err := e.value(k); err != nil {
				return fmt.Errorf("map key: %w", err)
			}
			if err := e.value(v); err != nil {
				return fmt.Errorf("map value of %v: %w", k, err)
			}
			return nil
		})
	})
}

// array writes the elements with the fixed-width constructor of the
// first one's type: an array has one constructor for all its elements.
func (e *encoder) array(a Array) error {
	e.byte1(codeArray32)
	at := len(e.buf)
	e.u32(0)
	e.u32(uint32(len(a)))
	if len(a) == 0 {
		e.byte1(codeNull)
	} else {
		code, err := arrayCode(a[0])
		if err != nil {
			return err
		}
		e.byte1(code)
		for i, v := range a {
			if c, err := arrayCode(v); err != nil || c != code {
				return fmt.Errorf("amqp: array element %d is a %T, not the type of the first", i, v)
			}
			if err := e.arrayElement(code, v); err != nil {
				return err
			}
		}
	}
	binary.BigEndian.PutUint32(e.buf[at:], uint32(len(e.buf)-at-4))
	return nil
}

func arrayCode(v any) (byte, error) {
	switch v.(type) {
	case bool:
		return codeBool, nil
	case uint8:
		return codeUbyte, nil
	case uint16:
		return codeUshort, nil
	case uint32:
		return codeUint, nil
	case uint64:
		return codeUlong, nil
	case int8:
		return codeByte, nil
	case int16:
		return codeShort, nil
	case int32:
		return codeInt, nil
	case int64, int:
		return codeLong, nil
	case float32:
		return codeFloat, nil
	case float64:
		return codeDouble, nil
	case Char:
		return codeChar, nil
	case time.Time:
		return codeTimestamp, nil
	case UUID:
		return codeUUID, nil
	case []byte:
		return codeVbin32, nil
	case string:
		return codeStr32, nil
	case Symbol:
		return codeSym32, nil
	case []any:
		return codeList32, nil
	case map[any]any, map[Symbol]any, map[string]any:
		return codeMap32, nil
	}
	return 0, fmt.Errorf("amqp: cannot encode %T in an array", v)
}

// arrayElement writes v without its constructor.
func (e *encoder) arrayElement(code byte, v any) error {
	switch x := v.(type) {
	case bool:
		if x {
			e.byte1(1)
		} else {
			e.byte1(0)
		}
		return nil
	case uint8:
		e.byte1(x)
		return nil
	case uint16:
		e.u16(x)
		return nil
	case uint32:
		e.u32(x)
		return nil
	case uint64:
		e.u64(x)
		return nil
	case int8:
		e.byte1(byte(x))
		return nil
	case int16:
		e.u16(uint16(x))
		return nil
	case int32:
		e.u32(uint32(x))
		return nil
	case int64:
		e.u64(uint64(x))
		return nil
	case int:
		e.u64(uint64(x))
		return nil
	case []byte:
		e.u32(uint32(len(x)))
		e.buf = append(e.buf, x...)
		return nil
	case string:
		e.u32(uint32(len(x)))
		e.buf = append(e.buf, x...)
		return nil
	case Symbol:
		e.u32(uint32(len(x)))
		e.buf = append(e.buf, x...)
		return nil
	}
	// The rest: encode with a constructor and drop it. Lists and maps are
	// written in their 32-bit form, which is what the array declared.
	start := len(e.buf)
	if err := e.value(v); err != nil {
		return err
	}
	if e.buf[start] == codeList0 {
		e.buf = append(e.buf[:start], 0, 0, 0, 4, 0, 0, 0, 0)
		return nil
	}
	if e.buf[start] != code {
		return fmt.Errorf("amqp: array element %T encoded as %#x, not %#x", v, e.buf[start], code)
	}
	e.buf = append(e.buf[:start], e.buf[start+1:]...)
	return nil
}
