package sqlfilter

import (
	"errors"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	"color = 'red' AND quantity > 10",
	"sys.Label LIKE 'order%' OR sys.Subject NOT LIKE '%!_x' ESCAPE '!'",
	"NOT (a IN (1, 2.5, 'x', NULL) OR b IS NOT NULL) AND EXISTS([my prop])",
	"-(a + -5) * 3 % 2 / 1.5e3 <> --b",
	"user.[a]]b] = @color AND quantity >= @limit",
	"sys.EnqueuedTimeUtc > sys.ScheduledEnqueueTimeUtc OR sys.TimeToLive < 60",
	"1=1",
	"((((a = 1))))",
	"x = -9223372036854775808 OR y = 1e308 * 10",
	"a = 'unterminated",
	"[",
	"\"quoted ident\" = 'it''s'",
	"a = 1 AND\nb = 2",
	"größe = 1 OR ı = 2 OR ſys.label = 'x'",
	"newid() = 1",
	"a NOT",
	"a = @",
	"\xff = 1",
	"a LIKE '\xff%' ESCAPE '\xff'",
}

// FuzzParse checks that no input makes the parser panic, that every
// accepted filter prints to a form that parses back to the same form and
// the same behaviour, and that evaluating it never panics.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	m := sampleMessage()
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := Parse(s, testParams)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Pos < 0 || pe.Pos > len(s) || pe.Error() == "" {
				t.Fatalf("Parse(%q): bad error %#v", s, err)
			}
			return
		}
		printed := flt.String()
		// The canonical form may be longer than the limit (it adds spaces),
		// so the reparse is not held to it.
		again, err := parseFilter(printed, testParams, 0)
		if err != nil {
			t.Fatalf("Parse(%q) printed %q, which does not parse: %v", s, printed, err)
		}
		if again.String() != printed {
			t.Fatalf("Parse(%q) printed %q, which prints as %q", s, printed, again.String())
		}
		ok1, err1 := flt.Match(m)
		ok2, err2 := again.Match(m)
		var ee *EvalError
		if err1 != nil && !errors.As(err1, &ee) {
			t.Fatalf("Match(%q): error %v is not an *EvalError", s, err1)
		}
		if ok1 != ok2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("%q and its canonical form %q disagree: %v/%v and %v/%v", s, printed, ok1, err1, ok2, err2)
		}
	})
}

// FuzzParseAction does the same for rule actions.
func FuzzParseAction(f *testing.F) {
	for _, s := range []string{
		"SET a = 1; REMOVE b",
		"set sys.Label = sys.Label + '!'; SET [x y] = @color;",
		"SET a = -(b * 2) % 3; REMOVE [and]",
		"SET sys.SequenceNumber = 1",
		"REMOVE",
		";",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAction(s, testParams)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Pos < 0 || pe.Pos > len(s) {
				t.Fatalf("ParseAction(%q): bad error %#v", s, err)
			}
			return
		}
		printed := a.String()
		again, err := parseAction(printed, testParams, 0)
		if err != nil || again.String() != printed {
			t.Fatalf("ParseAction(%q) printed %q, which reparses as %v, %v", s, printed, again, err)
		}
		if err := a.Apply(sampleMessage()); err != nil {
			var ee *EvalError
			if !errors.As(err, &ee) {
				t.Fatalf("Apply(%q): error %v is not an *EvalError", s, err)
			}
		}
	})
}

// naiveLike is an obviously correct (and exponential) LIKE without escapes.
func naiveLike(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	p, pw := utf8.DecodeRuneInString(pattern)
	switch p {
	case '%':
		for i := 0; ; {
			if naiveLike(pattern[pw:], s[i:]) {
				return true
			}
			if i >= len(s) {
				return false
			}
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
		}
	case '_':
		if s == "" {
			return false
		}
		_, w := utf8.DecodeRuneInString(s)
		return naiveLike(pattern[pw:], s[w:])
	}
	return len(s) >= pw && s[:pw] == pattern[:pw] && naiveLike(pattern[pw:], s[pw:])
}

// FuzzLike compares the compiled matcher with naiveLike.
func FuzzLike(f *testing.F) {
	for _, seed := range [][2]string{
		{"a%b_c", "axxbyc"}, {"%a%a%", "banana"}, {"_", "é"}, {"%%_", ""},
		{"order%", "order.created"}, {"%ed", "created"}, {"%der%", "order"}, {"a", "a"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 16 || len(s) > 32 {
			return // keep naiveLike fast
		}
		m, fault := compileLike(pattern, 0, false)
		if fault != "" {
			t.Fatalf("compileLike(%q): %s", pattern, fault)
		}
		if got, want := m.match(s), naiveLike(pattern, s); got != want {
			t.Fatalf("%q LIKE %q = %v, want %v", s, pattern, got, want)
		}
	})
}
