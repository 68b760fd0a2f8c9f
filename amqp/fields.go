package amqp

import "fmt"

// fieldReader takes typed fields out of a decoded composite's list,
// remembering the first field of a wrong type. A missing or null field
// reads as its zero value (callers apply the spec's defaults).
type fieldReader struct {
	what string
	f    []any
	err  error
}

func (r *fieldReader) get(i int) any {
	if i < len(r.f) {
		return r.f[i]
	}
	return nil
}

func (r *fieldReader) wrong(i int, want string) {
	if r.err == nil {
		r.err = malformed("%s field %d is a %T, not %s", r.what, i, r.get(i), want)
	}
}

func (r *fieldReader) present(i int) bool { return r.get(i) != nil }

func (r *fieldReader) u32(i int, def uint32) uint32 {
	switch v := r.get(i).(type) {
	case nil:
		return def
	case uint32:
		return v
	}
	r.wrong(i, "uint")
	return def
}

func (r *fieldReader) u64(i int, def uint64) uint64 {
	switch v := r.get(i).(type) {
	case nil:
		return def
	case uint64:
		return v
	case uint32:
		return uint64(v)
	}
	r.wrong(i, "ulong")
	return def
}

func (r *fieldReader) u16(i int, def uint16) uint16 {
	switch v := r.get(i).(type) {
	case nil:
		return def
	case uint16:
		return v
	}
	r.wrong(i, "ushort")
	return def
}

func (r *fieldReader) u8(i int, def uint8) uint8 {
	switch v := r.get(i).(type) {
	case nil:
		return def
	case uint8:
		return v
	}
	r.wrong(i, "ubyte")
	return def
}

func (r *fieldReader) boolean(i int) bool {
	switch v := r.get(i).(type) {
	case nil:
		return false
	case bool:
		return v
	}
	r.wrong(i, "boolean")
	return false
}

func (r *fieldReader) str(i int) string {
	switch v := r.get(i).(type) {
	case nil:
		return ""
	case string:
		return v
	}
	r.wrong(i, "string")
	return ""
}

func (r *fieldReader) symbol(i int) Symbol {
	switch v := r.get(i).(type) {
	case nil:
		return ""
	case Symbol:
		return v
	}
	r.wrong(i, "symbol")
	return ""
}

func (r *fieldReader) binary(i int) []byte {
	switch v := r.get(i).(type) {
	case nil:
		return nil
	case []byte:
		return v
	}
	r.wrong(i, "binary")
	return nil
}

// symbols reads a multiple symbol field: one symbol or an array of them.
func (r *fieldReader) symbols(i int) []Symbol {
	switch v := r.get(i).(type) {
	case nil:
		return nil
	case Symbol:
		return []Symbol{v}
	case Array:
		out := make([]Symbol, 0, len(v))
		for _, e := range v {
			s, ok := e.(Symbol)
			if !ok {
				r.wrong(i, "symbol array")
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	r.wrong(i, "symbols")
	return nil
}

// fieldsMap reads a map keyed by symbols (AMQP "fields").
func (r *fieldReader) fieldsMap(i int) map[Symbol]any {
	switch v := r.get(i).(type) {
	case nil:
		return nil
	case map[any]any:
		out := make(map[Symbol]any, len(v))
		for k, e := range v {
			// Symbol keys, as the spec says; some clients send strings
			// (go-amqp's error info).
			switch s := k.(type) {
			case Symbol:
				out[s] = e
			case string:
				out[Symbol(s)] = e
			default:
				r.wrong(i, "map with symbol keys")
				return nil
			}
		}
		return out
	}
	r.wrong(i, "map")
	return nil
}

func (r *fieldReader) errorField(i int) *Error {
	if !r.present(i) {
		return nil
	}
	e, err := decodeError(r.get(i))
	if err != nil && r.err == nil {
		r.err = err
	}
	return e
}

// composite checks that v is the described list with the given code and
// returns a reader of its fields.
func composite(v any, code uint64, what string) (*fieldReader, error) {
	d, ok := v.(Described)
	if !ok {
		return nil, malformed("%s: a %T, not a described list", what, v)
	}
	if c, ok := d.Descriptor.(uint64); !ok || c != code {
		return nil, malformed("%s: descriptor %v, not %#x", what, d.Descriptor, code)
	}
	l, ok := d.Value.([]any)
	if !ok {
		return nil, malformed("%s: a described %T, not a list", what, d.Value)
	}
	return &fieldReader{what: what, f: l}, nil
}

// describedList builds a composite value, dropping trailing nulls as the
// spec allows.
func describedList(code uint64, f ...any) Described {
	n := len(f)
	for n > 0 && isNull(f[n-1]) {
		n--
	}
	return Described{Descriptor: code, Value: f[:n]}
}

// isNull is true for nil and for typed nils stored in an interface.
func isNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case *Error:
		return x == nil
	case map[Symbol]any:
		return x == nil
	case []Symbol:
		return x == nil
	case []byte:
		return x == nil
	}
	return false
}

// Error is an AMQP error: a condition symbol, a description and info.
type Error struct {
	Condition   Symbol
	Description string
	Info        map[Symbol]any
}

func (e *Error) Error() string {
	return fmt.Sprintf("amqp: %s: %s", e.Condition, e.Description)
}

// Standard error conditions the engine raises.
const (
	ErrCondInternal        Symbol = "amqp:internal-error"
	ErrCondNotFound        Symbol = "amqp:not-found"
	ErrCondUnauthorized    Symbol = "amqp:unauthorized-access"
	ErrCondDecode          Symbol = "amqp:decode-error"
	ErrCondNotAllowed      Symbol = "amqp:not-allowed"
	ErrCondNotImplemented  Symbol = "amqp:not-implemented"
	ErrCondInvalidField    Symbol = "amqp:invalid-field"
	ErrCondFramingError    Symbol = "amqp:connection:framing-error"
	ErrCondUnattached      Symbol = "amqp:session:unattached-handle"
	ErrCondHandleInUse     Symbol = "amqp:session:handle-in-use"
	ErrCondDetachForced    Symbol = "amqp:link:detach-forced"
	ErrCondMessageTooLarge Symbol = "amqp:link:message-size-exceeded"
	ErrCondResourceLimit   Symbol = "amqp:resource-limit-exceeded"
	ErrCondPreconditionErr Symbol = "amqp:precondition-failed"
)

const codeError = 0x1d

func (e *Error) described() any {
	if e == nil {
		return nil
	}
	var info any
	if e.Info != nil {
		info = e.Info
	}
	return describedList(codeError, e.Condition, e.Description, info)
}

func decodeError(v any) (*Error, error) {
	r, err := composite(v, codeError, "error")
	if err != nil {
		return nil, err
	}
	e := &Error{Condition: r.symbol(0), Description: r.str(1), Info: r.fieldsMap(2)}
	return e, r.err
}
