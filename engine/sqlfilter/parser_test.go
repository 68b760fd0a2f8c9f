package sqlfilter

import (
	"errors"
	"strings"
	"testing"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

var testParams = map[string]*raftbusv1.PropertyValue{
	"@color": {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "red"}},
	"limit":  {Value: &raftbusv1.PropertyValue_IntValue{IntValue: 10}},
	"@ratio": {Value: &raftbusv1.PropertyValue_DoubleValue{DoubleValue: 0.5}},
	"@flag":  {Value: &raftbusv1.PropertyValue_BoolValue{BoolValue: true}},
	"@pat":   {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "order%"}},
	"@esc":   {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "!"}},
	"@none":  {},
}

func TestParseCanonicalForm(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"color='red'", "color = 'red'"},
		{"color = 'red' and quantity > 10", "color = 'red' AND quantity > 10"},
		{"a=1 OR b=2 AND c=3", "a = 1 OR b = 2 AND c = 3"},
		{"(a=1 OR b=2) AND c=3", "(a = 1 OR b = 2) AND c = 3"},
		{"a=1 OR (b=2 OR c=3)", "a = 1 OR (b = 2 OR c = 3)"},
		{"((a=1))", "a = 1"},
		{"not a = 1", "NOT a = 1"},
		{"NOT (a = 1 AND b = 2)", "NOT (a = 1 AND b = 2)"},
		{"not not a=1", "NOT NOT a = 1"},
		{"a <> 1 and b != 2", "a <> 1 AND b <> 2"},
		{"a<1 or a<=1 or a>1 or a>=1", "a < 1 OR a <= 1 OR a > 1 OR a >= 1"},
		{"1=1", "1 = 1"},
		{"1 = 0", "1 = 0"},
		{"a + b * c = 7", "a + b * c = 7"},
		{"(a + b) * c = 7", "(a + b) * c = 7"},
		{"a - (b - c) = 0", "a - (b - c) = 0"},
		{"(a - b) - c = 0", "a - b - c = 0"},
		{"a % 2 = 1 AND a / 2 > 3", "a % 2 = 1 AND a / 2 > 3"},
		{"-a = -5", "-a = -5"},
		{"-(a + 1) = 2", "-(a + 1) = 2"},
		{"- -a = 1", "--a = 1"},
		{"-(5) = - -5", "-5 = 5"},
		{"-(-9223372036854775808) = 0", "--9223372036854775808 = 0"},
		{"a - -5 = 0", "a - -5 = 0"},
		{"+a = 1", "a = 1"},
		{"x = -9223372036854775808", "x = -9223372036854775808"},
		{"x = 1.50", "x = 1.5"},
		{"x = 2.0", "x = 2.0"},
		{"x = 1e3", "x = 1000.0"},
		{"x = 1.5E-7", "x = 1.5e-07"},
		{"x = 1e21", "x = 1e+21"},
		{"s = 'it''s'", "s = 'it''s'"},
		{"s = ''", "s = ''"},
		{"b = true or b = FALSE", "b = TRUE OR b = FALSE"},
		{"x IS NULL", "x IS NULL"},
		{"x is not null", "x IS NOT NULL"},
		{"x = null", "x = NULL"},
		{"x in ('a','b', 'c')", "x IN ('a', 'b', 'c')"},
		{"x not in (1, 2+3)", "x NOT IN (1, 2 + 3)"},
		{"x like 'a%'", "x LIKE 'a%'"},
		{"x not like 'a!%%' escape '!'", "x NOT LIKE 'a!%%' ESCAPE '!'"},
		{"x LIKE @pat ESCAPE @esc", "x LIKE @pat ESCAPE @esc"},
		{"exists(color)", "EXISTS(color)"},
		{"EXISTS ( sys.label )", "EXISTS(sys.Label)"},
		{"sys.subject = 'x'", "sys.Label = 'x'"},
		{"SYS.MESSAGEID = 'x'", "sys.MessageId = 'x'"},
		{"sys.TimeToLive > 60", "sys.TimeToLive > 60"},
		{"user.color = 'red'", "color = 'red'"},
		{"USER.[my prop] = 1", "[my prop] = 1"},
		{"[my prop] = 1", "[my prop] = 1"},
		{`"my prop" = 1`, "[my prop] = 1"},
		{"[a]]b] = 1", "[a]]b] = 1"},
		{"[and] = 1", "[and] = 1"},
		{"[1st] = 1", "[1st] = 1"},
		{"_x1 = 1", "_x1 = 1"},
		{"größe = 1", "größe = 1"},
		{"color = @color", "color = @color"},
		{"quantity > @limit", "quantity > @limit"},
		{"a=1\nAND\tb=2", "a = 1 AND b = 2"},
		{"(a) = 1", "a = 1"},
		{"a = (1 + 2) * 3", "a = (1 + 2) * 3"},
		{"sys.Size > 100 AND sys.DeliveryCount < 5 AND sys.SequenceNumber >= 1",
			"sys.Size > 100 AND sys.DeliveryCount < 5 AND sys.SequenceNumber >= 1"},
	} {
		f, err := Parse(tc.in, testParams)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		got := f.String()
		if got != tc.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.in, got, tc.want)
			continue
		}
		again, err := Parse(got, testParams)
		if err != nil || again.String() != got {
			t.Errorf("reparse of %q: %v, %v", got, again, err)
		}
	}
}

func TestParseKeywordsAreCaseInsensitive(t *testing.T) {
	want := "NOT a IS NULL AND b IN (1) OR c LIKE 'x' ESCAPE '!' OR EXISTS(d) OR e = TRUE OR f NOT LIKE 'y' OR g = FALSE OR h = NULL"
	for _, in := range []string{
		want,
		strings.ToLower(want),
		"nOt a iS nUlL aNd b In (1) oR c LiKe 'x' EsCaPe '!' Or ExIsTs(d) OR e = tRuE OR f nOT lIKE 'y' OR g = fAlSe OR h = nUlL",
	} {
		f, err := Parse(in, nil)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if got := f.String(); got != want {
			t.Errorf("Parse(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	long := "a = '" + strings.Repeat("x", MaxExpressionLength) + "'"
	deep := strings.Repeat("(", MaxNestingDepth+1) + "a = 1" + strings.Repeat(")", MaxNestingDepth+1)
	for _, tc := range []struct {
		in       string
		pos      int
		expected string
		found    string
	}{
		{"", 0, "expression", "end of input"},
		{"   ", 3, "expression", "end of input"},
		{"color", 5, "comparison operator, IN, LIKE or IS", "end of input"},
		{"color = ", 8, "expression after '='", "end of input"},
		{"a = 1 AND", 9, "expression after 'AND'", "end of input"},
		{"a = 1 and ", 10, "expression after 'AND'", "end of input"},
		{"a = 1 OR b", 10, "comparison operator, IN, LIKE or IS", "end of input"},
		{"a AND b = 1", 2, "comparison operator, IN, LIKE or IS", "'AND'"},
		{"a = 1 b = 2", 6, "AND, OR or end of input", "'b'"},
		{"(a = 1", 6, "')'", "end of input"},
		{"a = 1)", 5, "AND, OR or end of input", "')'"},
		{"a = 'abc", 4, "expression after '='", "unterminated string literal"},
		{"a = 1 # 2", 6, "AND, OR or end of input", "'#'"},
		{"a == 1", 3, "expression after '='", "'='"},
		{"a IS 1", 5, "NULL after 'IS'", "'1'"},
		{"a IS NOT 1", 9, "NULL after 'NOT'", "'1'"},
		{"a NOT 1", 6, "IN or LIKE after 'NOT'", "'1'"},
		{"a IN 1", 5, "'(' after 'IN'", "'1'"},
		{"a IN ()", 6, "expression after '('", "')'"},
		{"a IN (1 2)", 8, "',' or ')'", "'2'"},
		{"a IN (1,", 8, "expression after ','", "end of input"},
		{"a LIKE 5", 7, "string after 'LIKE'", "'5'"},
		{"a LIKE 'x' ESCAPE 'ab'", 18, "single-character escape string", "string 'ab'"},
		{"a LIKE 'x!' ESCAPE '!'", 7, "character after the escape character at the end of the LIKE pattern", "string 'x!'"},
		{"a LIKE 'x!y' ESCAPE '!'", 7, "'%', '_' or the escape character after the escape character in the LIKE pattern", "string 'x!y'"},
		{"a LIKE @limit", 7, "string parameter", "'@limit'"},
		{"EXISTS color", 7, "'(' after 'EXISTS'", "'color'"},
		{"EXISTS(1)", 7, "property after '('", "'1'"},
		{"EXISTS(a", 8, "')' after 'a'", "end of input"},
		{"sys.Nope = 1", 4, "system property name", "'sys.Nope'"},
		{"foo.bar = 1", 0, "'sys' or 'user' before '.'", "'foo'"},
		{"sys. = 1", 5, "property name after '.'", "'='"},
		{"newid() = 1", 0, "property or constant (functions are not supported)", "function 'newid'"},
		{"a = @missing", 4, "a value for @missing in the parameters", "none"},
		{"a = @", 4, "expression after '='", "'@' without a parameter name"},
		{"a = 99999999999999999999", 4, "integer within the int64 range", "'99999999999999999999'"},
		{"a = 9223372036854775808", 4, "integer within the int64 range", "'9223372036854775808'"},
		{"a = 1e999", 4, "number within the float64 range", "'1e999'"},
		{"(a = 1) + 1 = 2", 0, "value expression", "condition"},
		{"a = (b = 1)", 4, "value expression", "condition"},
		{"NOT a", 5, "comparison operator, IN, LIKE or IS", "end of input"},
		{"a = 1 AND NOT", 13, "expression after 'NOT'", "end of input"},
		{"[] = 1", 0, "expression", "empty identifier"},
		{"[abc = 1", 0, "expression", "unterminated [identifier]"},
		{"a = TRUE AND OR", 13, "expression after 'AND'", "'OR'"},
		{"a = 1;", 5, "AND, OR or end of input", "';'"},
		{long, MaxExpressionLength, "at most 1024 characters", "1030 characters"},
		{deep, MaxNestingDepth, "at most 64 levels of nesting", "'('"},
		{"a = 1 AND\nb = ", 14, "expression after '='", "end of input"},
	} {
		_, err := Parse(tc.in, testParams)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want a *ParseError", tc.in, err)
			continue
		}
		if pe.Pos != tc.pos || pe.Expected != tc.expected || pe.Found != tc.found {
			t.Errorf("Parse(%q): got pos %d expected %q found %q; want pos %d expected %q found %q",
				shorten(tc.in), pe.Pos, pe.Expected, pe.Found, tc.pos, tc.expected, tc.found)
		}
	}
}

func TestParseErrorText(t *testing.T) {
	_, err := Parse("color = 'red' AND", nil)
	want := "sql filter: at position 17: expected expression after 'AND', found end of input"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	_, err = Parse("a = 1 AND\n  b =", nil)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || pe.Column != 6 {
		t.Fatalf("got %#v, want line 2 column 6", err)
	}
	want = "sql filter: at position 15 (line 2, column 6): expected expression after '=', found end of input"
	if err.Error() != want {
		t.Errorf("got %q, want %q", err.Error(), want)
	}
}

func TestParseLengthLimitCountsCharacters(t *testing.T) {
	// 1024 two-byte characters fit; the limit is not in bytes.
	body := strings.Repeat("é", MaxExpressionLength-len("a = ''"))
	if _, err := Parse("a = '"+body+"'", nil); err != nil {
		t.Errorf("expression of exactly %d characters: %v", MaxExpressionLength, err)
	}
}
