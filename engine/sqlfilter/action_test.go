package sqlfilter

import (
	"errors"
	"testing"
)

func TestParseActionCanonicalForm(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"  ", ""},
		{"SET a = 1", "SET a = 1"},
		{"set sys.label = 'x'; remove b;", "SET sys.Label = 'x'; REMOVE b"},
		{"SET total = price*quantity;SET [my prop]=@color", "SET total = price * quantity; SET [my prop] = @color"},
		{"SET user.a = sys.Label + '!'", "SET a = sys.Label + '!'"},
		{"SET sys.Subject = 'x'", "SET sys.Label = 'x'"},
		{"SET set = 1; REMOVE remove", "SET set = 1; REMOVE remove"},
		{"SET a = NULL", "SET a = NULL"},
		{"SET sys.CorrelationId = sys.MessageId; SET sys.To = 'x'; SET sys.ReplyTo = 'y'", "SET sys.CorrelationId = sys.MessageId; SET sys.To = 'x'; SET sys.ReplyTo = 'y'"},
	} {
		a, err := ParseAction(tc.in, testParams)
		if err != nil {
			t.Errorf("ParseAction(%q): %v", tc.in, err)
			continue
		}
		if got := a.String(); got != tc.want {
			t.Errorf("ParseAction(%q) = %q, want %q", tc.in, got, tc.want)
		}
		again, err := ParseAction(a.String(), testParams)
		if err != nil || again.String() != a.String() {
			t.Errorf("reparse of %q: %v", a.String(), err)
		}
	}
}

func TestParseActionErrors(t *testing.T) {
	for _, tc := range []struct {
		in       string
		pos      int
		expected string
		found    string
	}{
		{"a = 1", 0, "SET or REMOVE", "'a'"},
		{"SET", 3, "property after 'SET'", "end of input"},
		{"SET a", 5, "'=' after 'a'", "end of input"},
		{"SET a = ", 8, "expression after '='", "end of input"},
		{"SET a = 1 SET b = 2", 10, "';' or end of input", "'SET'"},
		{"SET a = 1;;", 10, "SET or REMOVE after ';'", "';'"},
		{"SET sys.SequenceNumber = 1", 4, "writable property", "'sys.SequenceNumber'"},
		{"SET sys.SessionId = 'x'", 4, "writable property", "'sys.SessionId'"},
		{"REMOVE sys.Label", 7, "application property (system properties cannot be removed)", "'sys.Label'"},
		{"SET a = (b = 1)", 8, "value expression", "condition"},
		{"SET a = @missing", 8, "a value for @missing in the parameters", "none"},
		{"REMOVE 1", 7, "property after 'REMOVE'", "'1'"},
	} {
		_, err := ParseAction(tc.in, testParams)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("ParseAction(%q) = %v, want a *ParseError", tc.in, err)
			continue
		}
		if !pe.Action || pe.Pos != tc.pos || pe.Expected != tc.expected || pe.Found != tc.found {
			t.Errorf("ParseAction(%q): got pos %d expected %q found %q; want pos %d expected %q found %q",
				tc.in, pe.Pos, pe.Expected, pe.Found, tc.pos, tc.expected, tc.found)
		}
	}
	_, err := ParseAction("SET a =", nil)
	if want := "sql action: at position 7: expected expression after '=', found end of input"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestActionApply(t *testing.T) {
	m := sampleMessage()
	a, err := ParseAction("SET total = quantity * price; SET sys.Label = sys.Label + '.audited'; "+
		"REMOVE color; SET copy = total; SET quantity = NULL; SET sys.To = NULL; REMOVE missing; SET [my prop] = @color", testParams)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(m); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		expr string
		want result
	}{
		{"total = 30.0", yes},
		{"copy = 30.0", yes}, // each SET sees the ones before it
		{"sys.Label = 'order.created.audited'", yes},
		{"EXISTS(color)", no},
		{"EXISTS(quantity)", no}, // SET to NULL removes
		{"EXISTS(sys.To)", no},
		{"Color = 'blue'", yes}, // names are case-sensitive: Color stays
		{"[my prop] = 'red'", yes},
	} {
		checkMatch(t, tc.expr, nil, m, tc.want, nil)
	}
}

func TestActionApplyErrors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		err  error
	}{
		{"SET sys.Label = 5", ErrTypeMismatch},
		{"SET a = color + 1", ErrTypeMismatch},
		{"SET a = quantity / zero", ErrDivisionByZero},
	} {
		a, err := ParseAction(tc.expr, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.expr, err)
		}
		err = a.Apply(sampleMessage())
		var ee *EvalError
		if !errors.As(err, &ee) || !errors.Is(err, tc.err) || !ee.Action {
			t.Errorf("%q: got %v, want an action *EvalError wrapping %v", tc.expr, err, tc.err)
		}
	}
	a, _ := ParseAction("SET sys.Label = 5", nil)
	want := "sql action: evaluating 'SET' at position 0: type mismatch (string, int64)"
	if err := a.Apply(sampleMessage()); err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
