package sqlfilter

import (
	"errors"
	"strconv"
)

// ParseError reports an expression that cannot be compiled: where, what the
// parser expected there and what it found.
type ParseError struct {
	// Pos is the byte offset in the expression; Line and Column (1-based,
	// Column counting characters) locate the same place.
	Pos, Line, Column int
	Expected          string
	Found             string
	// Action is true when the expression was a rule action.
	Action bool
}

func (e *ParseError) Error() string {
	what := "sql filter"
	if e.Action {
		what = "sql action"
	}
	at := "at position " + strconv.Itoa(e.Pos)
	if e.Line > 1 {
		at += " (line " + strconv.Itoa(e.Line) + ", column " + strconv.Itoa(e.Column) + ")"
	}
	return what + ": " + at + ": expected " + e.Expected + ", found " + e.Found
}

// locate fills in Line and Column from Pos.
func (e *ParseError) locate(src string) {
	e.Line, e.Column = 1, 1
	for i, r := range src {
		if i >= e.Pos {
			break
		}
		if r == '\n' {
			e.Line++
			e.Column = 1
		} else {
			e.Column++
		}
	}
}

// The causes of evaluation errors; test with errors.Is.
var (
	// ErrTypeMismatch: an operator was applied to values of kinds it does
	// not accept (a string compared with a number, a bool ordered).
	ErrTypeMismatch = errors.New("type mismatch")
	// ErrDivisionByZero: integer division or modulo by zero.
	ErrDivisionByZero = errors.New("division by zero")
	// ErrOverflow: an int64 result out of range.
	ErrOverflow = errors.New("integer overflow")
)

// EvalError reports a filter or action that cannot be evaluated against a
// particular message. The message is then not matched; Service Bus
// dead-letters it when the subscription asks for it.
type EvalError struct {
	Pos         int    // byte offset of the operator in the expression
	Op          string // the operator, e.g. "=" or "LIKE"
	Left, Right Kind   // the operand kinds (Right is KindNull for unary ones)
	Err         error  // ErrTypeMismatch, ErrDivisionByZero or ErrOverflow
	// Action is true when a rule action failed, false for a filter.
	Action bool
}

func (e *EvalError) Error() string {
	what := "sql filter"
	if e.Action {
		what = "sql action"
	}
	s := what + ": evaluating '" + e.Op + "' at position " + strconv.Itoa(e.Pos) + ": " + e.Err.Error()
	if e.Err == ErrTypeMismatch {
		s += " (" + e.Left.String()
		if e.Right != KindNull {
			s += ", " + e.Right.String()
		}
		s += ")"
	}
	return s
}

func (e *EvalError) Unwrap() error { return e.Err }
