package sqlfilter

import "testing"

func BenchmarkMatch(b *testing.B) {
	m := sampleMessage()
	for _, bc := range []struct{ name, expr string }{
		{"string-eq", "color = 'red'"},
		{"two-comparisons", "color = 'red' AND quantity > 10"},
		{"like-prefix", "sys.Label LIKE 'order%'"},
		{"like-general", "sys.Label LIKE 'o%r_c%d'"},
		{"in-list", "color IN ('green', 'blue', 'yellow', 'red')"},
		{"arithmetic", "price * quantity > 20 AND sys.TimeToLive > 60"},
		{"missing-property", "missing = 1 OR EXISTS(color)"},
	} {
		f, err := Parse(bc.expr, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := f.Match(m); !ok || err != nil {
					b.Fatal("no match", err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("color = 'red' AND quantity > 10 OR sys.Label LIKE 'order%'", nil); err != nil {
			b.Fatal(err)
		}
	}
}
