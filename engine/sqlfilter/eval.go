package sqlfilter

import (
	"bytes"
	"math"
	"strings"
)

// Match reports whether m satisfies the filter. An unknown result (a NULL
// or missing property in a comparison) does not match. When the filter
// cannot be evaluated against m the result is false with an *EvalError.
// Match does not allocate unless it returns an error or concatenates
// strings.
func (f *Filter) Match(m Message) (bool, error) {
	t, err := f.root.test(m)
	if err != nil {
		return false, err
	}
	return t == triTrue, nil
}

func (n *literal) eval(Message) (Value, error) { return n.v, nil }
func (n *param) eval(Message) (Value, error)   { return n.v, nil }

func (n *sysProp) eval(m Message) (Value, error) {
	if v, ok := m.System(n.p); ok {
		return v, nil
	}
	return Value{}, nil
}

func (n *userProp) eval(m Message) (Value, error) {
	if v, ok := m.User(n.name); ok {
		return v, nil
	}
	return Value{}, nil
}

func mismatch(pos int, op string, l, r Kind) error {
	return &EvalError{Pos: pos, Op: op, Left: l, Right: r, Err: ErrTypeMismatch}
}

func (n *negate) eval(m Message) (Value, error) {
	v, err := n.x.eval(m)
	if err != nil {
		return v, err
	}
	switch v.kind {
	case KindNull:
		return v, nil
	case KindInt:
		if v.i == math.MinInt64 {
			return Value{}, &EvalError{Pos: n.pos, Op: "-", Left: KindInt, Err: ErrOverflow}
		}
		return IntValue(-v.i), nil
	case KindFloat:
		return FloatValue(-v.f), nil
	}
	return Value{}, mismatch(n.pos, "-", v.kind, KindNull)
}

func isNumber(k Kind) bool { return k == KindInt || k == KindFloat }

func (v Value) toFloat() float64 {
	if v.kind == KindInt {
		return float64(v.i)
	}
	return v.f
}

func (n *arith) eval(m Message) (Value, error) {
	l, err := n.l.eval(m)
	if err != nil {
		return l, err
	}
	r, err := n.r.eval(m)
	if err != nil {
		return r, err
	}
	if l.kind == KindNull || r.kind == KindNull {
		return Value{}, nil
	}
	switch {
	case l.kind == KindInt && r.kind == KindInt:
		return n.intOp(l.i, r.i)
	case isNumber(l.kind) && isNumber(r.kind):
		a, b := l.toFloat(), r.toFloat()
		switch n.op {
		case '+':
			return FloatValue(a + b), nil
		case '-':
			return FloatValue(a - b), nil
		case '*':
			return FloatValue(a * b), nil
		case '/':
			return FloatValue(a / b), nil
		default:
			return FloatValue(math.Mod(a, b)), nil
		}
	case l.kind == KindString && r.kind == KindString && n.op == '+':
		return StringValue(l.s + r.s), nil
	}
	return Value{}, mismatch(n.pos, string(n.op), l.kind, r.kind)
}

// intOp is int64 arithmetic that reports overflow and division by zero
// instead of wrapping or panicking.
func (n *arith) intOp(a, b int64) (Value, error) {
	fail := func(err error) (Value, error) {
		return Value{}, &EvalError{Pos: n.pos, Op: string(n.op), Left: KindInt, Right: KindInt, Err: err}
	}
	switch n.op {
	case '+':
		s := a + b
		if (a^s)&(b^s) < 0 {
			return fail(ErrOverflow)
		}
		return IntValue(s), nil
	case '-':
		s := a - b
		if (a^b)&(a^s) < 0 {
			return fail(ErrOverflow)
		}
		return IntValue(s), nil
	case '*':
		if a == 0 || b == 0 {
			return IntValue(0), nil
		}
		s := a * b
		if s/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
			return fail(ErrOverflow)
		}
		return IntValue(s), nil
	case '/':
		if b == 0 {
			return fail(ErrDivisionByZero)
		}
		if a == math.MinInt64 && b == -1 {
			return fail(ErrOverflow)
		}
		return IntValue(a / b), nil
	default:
		if b == 0 {
			return fail(ErrDivisionByZero)
		}
		if b == -1 {
			return IntValue(0), nil
		}
		return IntValue(a % b), nil
	}
}

// order is the outcome of comparing two values.
type order int8

const (
	less order = iota - 1
	same
	greater
	unordered // NaN involved
)

// compareValues compares two non-null values; ordering is only defined for
// numbers, strings, timestamps and bytes, equality also for bools.
func compareValues(op cmpOp, pos int, l, r Value) (bool, error) {
	var o order
	switch {
	case l.kind == KindInt && r.kind == KindInt:
		o = cmpInt(l.i, r.i)
	case l.orig == OriginUint64 && r.orig == OriginUint64:
		// Both uint64, one at least beyond int64: exactly, not as floats.
		o = cmpUint(uint64(l.i), uint64(r.i))
	case isNumber(l.kind) && isNumber(r.kind):
		a, b := l.toFloat(), r.toFloat()
		switch {
		case a < b:
			o = less
		case a > b:
			o = greater
		case a == b:
			o = same
		default:
			o = unordered
		}
	case l.kind == KindString && r.kind == KindString:
		o = order(strings.Compare(l.s, r.s))
	case l.kind == KindTime && r.kind == KindTime:
		o = cmpInt(l.i, r.i)
		if o == same {
			o = cmpInt(int64(l.nsec), int64(r.nsec))
		}
	case l.kind == KindBytes && r.kind == KindBytes:
		o = order(bytes.Compare(l.b, r.b))
	case l.kind == KindBool && r.kind == KindBool && (op == opEq || op == opNe):
		o = cmpInt(l.i, r.i)
	default:
		return false, mismatch(pos, cmpOpText[op], l.kind, r.kind)
	}
	switch op {
	case opEq:
		return o == same, nil
	case opNe:
		return o != same, nil
	case opLt:
		return o == less, nil
	case opLe:
		return o == less || o == same, nil
	case opGt:
		return o == greater, nil
	default:
		return o == greater || o == same, nil
	}
}

func cmpInt(a, b int64) order {
	switch {
	case a < b:
		return less
	case a > b:
		return greater
	}
	return same
}

func cmpUint(a, b uint64) order {
	switch {
	case a < b:
		return less
	case a > b:
		return greater
	}
	return same
}

func truth(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

func (n *compare) test(m Message) (tri, error) {
	l, err := n.l.eval(m)
	if err != nil {
		return triFalse, err
	}
	r, err := n.r.eval(m)
	if err != nil {
		return triFalse, err
	}
	if l.kind == KindNull || r.kind == KindNull {
		return triUnknown, nil
	}
	ok, err := compareValues(n.op, n.pos, l, r)
	return truth(ok), err
}

func (n *logic) test(m Message) (tri, error) {
	l, err := n.l.test(m)
	if err != nil {
		return l, err
	}
	// Short-circuit as SQL allows: FALSE AND x, TRUE OR x.
	if n.or == (l == triTrue) && l != triUnknown {
		return l, nil
	}
	r, err := n.r.test(m)
	if err != nil {
		return r, err
	}
	if n.or {
		if r == triTrue {
			return triTrue, nil
		}
	} else if r == triFalse {
		return triFalse, nil
	}
	if l == triUnknown || r == triUnknown {
		return triUnknown, nil
	}
	return r, nil
}

func (n *not) test(m Message) (tri, error) {
	t, err := n.x.test(m)
	switch {
	case err != nil || t == triUnknown:
		return t, err
	case t == triTrue:
		return triFalse, nil
	}
	return triTrue, nil
}

// test implements x [NOT] IN (list): true when some item equals x, unknown
// when none does but one is NULL.
func (n *inList) test(m Message) (tri, error) {
	x, err := n.x.eval(m)
	if err != nil || x.kind == KindNull {
		return triUnknown, err
	}
	sawNull := false
	for _, e := range n.list {
		v, err := e.eval(m)
		if err != nil {
			return triFalse, err
		}
		if v.kind == KindNull {
			sawNull = true
			continue
		}
		eq, err := compareValues(opEq, n.pos, x, v)
		if err != nil {
			return triFalse, err
		}
		if eq {
			return truth(!n.not), nil
		}
	}
	if sawNull {
		return triUnknown, nil
	}
	return truth(n.not), nil
}

func (n *like) test(m Message) (tri, error) {
	x, err := n.x.eval(m)
	if err != nil || x.kind == KindNull {
		return triUnknown, err
	}
	if x.kind != KindString {
		return triFalse, mismatch(n.pos, "LIKE", x.kind, KindString)
	}
	return truth(n.m.match(x.s) != n.not), nil
}

func (n *isNull) test(m Message) (tri, error) {
	x, err := n.x.eval(m)
	if err != nil {
		return triFalse, err
	}
	return truth((x.kind == KindNull) != n.not), nil
}

func (n *exists) test(m Message) (tri, error) {
	var ok bool
	switch p := n.prop.(type) {
	case *sysProp:
		_, ok = m.System(p.p)
	case *userProp:
		_, ok = m.User(p.name)
	}
	return truth(ok), nil
}
