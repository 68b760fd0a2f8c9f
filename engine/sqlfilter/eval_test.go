package sqlfilter

import (
	"errors"
	"testing"
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// result of a filter against a message: match, no match, or an error.
type result int

const (
	no result = iota
	yes
	fails
)

func checkMatch(t *testing.T, expr string, params map[string]*raftbusv1.PropertyValue, m Message, want result, wantErr error) {
	t.Helper()
	f, err := Parse(expr, params)
	if err != nil {
		t.Errorf("Parse(%q): %v", expr, err)
		return
	}
	got, err := f.Match(m)
	switch {
	case want == fails:
		var ee *EvalError
		if !errors.As(err, &ee) || (wantErr != nil && !errors.Is(err, wantErr)) {
			t.Errorf("%q: got %v, %v; want an *EvalError (%v)", expr, got, err, wantErr)
		}
	case err != nil:
		t.Errorf("%q: unexpected error %v", expr, err)
	case got != (want == yes):
		t.Errorf("%q: matched = %v, want %v", expr, got, want == yes)
	}
}

func TestMatchOperators(t *testing.T) {
	m := sampleMessage()
	for _, tc := range []struct {
		expr string
		want result
	}{
		// Comparisons.
		{"color = 'red'", yes},
		{"color = 'RED'", no}, // ordinal, case-sensitive
		{"color <> 'red'", no},
		{"color != 'blue'", yes},
		{"color < 's'", yes},
		{"color > 'r'", yes},
		{"color >= 'red'", yes},
		{"color <= 'rec'", no},
		{"quantity = 12", yes},
		{"quantity > 10", yes},
		{"quantity >= 12", yes},
		{"quantity < 12", no},
		{"quantity <= 11", no},
		{"quantity <> 12", no},
		{"urgent = TRUE", yes},
		{"urgent <> FALSE", yes},
		{"blob = blob", yes},
		{"when = sys.EnqueuedTimeUtc", yes},
		{"when < sys.EnqueuedTimeUtc", no},
		// Property names: user ones are case-sensitive, bracketed, scoped.
		{"Color = 'blue'", yes},
		{"user.color = 'red'", yes},
		{"[my prop] = 'spaced'", yes},
		{"COLOR = 'red'", no},
		{"empty = ''", yes},
		{"name = 'Ünïcødé'", yes},
		// Numeric promotion.
		{"quantity = 12.0", yes},
		{"price = 2.5", yes},
		{"price > 2", yes},
		{"price * 2 = 5", yes},
		{"quantity / 5 = 2", yes},     // integer division
		{"quantity / 5.0 = 2.4", yes}, // float division
		{"quantity % 5 = 2", yes},
		{"price % 1 = 0.5", yes},
		{"quantity + price = 14.5", yes},
		{"quantity - 2 * 3 = 6", yes},
		{"(quantity - 2) * 3 = 30", yes},
		{"-priority = 3", yes},
		{"-price = -2.5", yes},
		{"big = 9223372036854775807", yes},
		{"1 = 1", yes},
		{"1 = 0", no},
		{"1.0 / 0 > 1e308", yes}, // float division by zero is +Inf
		// Logic.
		{"color = 'red' AND quantity > 10", yes},
		{"color = 'red' AND quantity > 20", no},
		{"color = 'blue' OR quantity > 10", yes},
		{"color = 'blue' OR quantity > 20", no},
		{"NOT color = 'blue'", yes},
		{"NOT (color = 'red' AND urgent = TRUE)", no},
		{"color = 'red' OR 1 / zero = 1", yes}, // TRUE OR x short-circuits
		{"color = 'blue' AND 1 / zero = 1", no},
		// IN.
		{"color IN ('green', 'red')", yes},
		{"color IN ('green', 'blue')", no},
		{"color NOT IN ('green', 'blue')", yes},
		{"quantity IN (1, 12.0)", yes},
		{"quantity IN (6 + 6)", yes},
		{"quantity IN (1, NULL)", no},     // unknown
		{"quantity NOT IN (1, NULL)", no}, // unknown too
		{"quantity IN (12, NULL)", yes},
		{"missing IN (1, 2)", no},
		{"missing NOT IN (1, 2)", no},
		// LIKE.
		{"sys.Label LIKE 'order%'", yes},
		{"sys.Label LIKE '%created'", yes},
		{"sys.Label LIKE '%der.cr%'", yes},
		{"sys.Label LIKE 'order_created'", yes},
		{"sys.Label LIKE 'order_'", no},
		{"sys.Label LIKE 'o%r%d'", yes},
		{"sys.Label LIKE 'o%x%d'", no},
		{"sys.Label LIKE '%'", yes},
		{"sys.Label LIKE 'order.created'", yes},
		{"sys.Label LIKE 'ORDER%'", no},
		{"sys.Label NOT LIKE 'order%'", no},
		{"name LIKE '_n_c_d_'", yes}, // '_' is one character, not one byte
		{"name LIKE 'Ü%é'", yes},
		{"pattern LIKE '50!% off!_now' ESCAPE '!'", yes},
		{"pattern LIKE '50!%%' ESCAPE '!'", yes},
		{"pattern LIKE '%!_%' ESCAPE '!'", yes},
		{"pattern LIKE '50!_%' ESCAPE '!'", no},
		{"pattern LIKE '50\\% off%' ESCAPE '\\'", yes},
		{"empty LIKE ''", yes},
		{"empty LIKE '%'", yes},
		{"empty LIKE '_'", no},
		{"missing LIKE '%'", no},
		{"missing NOT LIKE '%'", no},
		// NULL and missing properties.
		{"missing = 1", no},
		{"missing <> 1", no},
		{"NOT missing = 1", no},
		{"missing IS NULL", yes},
		{"missing IS NOT NULL", no},
		{"color IS NULL", no},
		{"color IS NOT NULL", yes},
		{"missing + 1 IS NULL", yes},
		{"-missing IS NULL", yes},
		{"NULL IS NULL", yes},
		{"color = NULL", no},
		{"missing = 1 OR color = 'red'", yes},
		{"missing = 1 AND color = 'red'", no},
		{"NOT (missing = 1 AND color = 'blue')", yes}, // unknown AND false is false
		{"NOT (missing = 1 OR color = 'red')", no},
		{"missing = 1 OR missing = 2", no},
		{"sys.CorrelationId IS NULL", yes},
		{"sys.CorrelationId = 'x'", no},
		// EXISTS.
		{"EXISTS(color)", yes},
		{"EXISTS(missing)", no},
		{"EXISTS(color) AND EXISTS([my prop])", yes},
		{"NOT EXISTS(missing)", yes},
		{"EXISTS(sys.Label)", yes},
		{"EXISTS(sys.ReplyTo)", no},
		// System properties.
		{"sys.MessageId = 'msg-1'", yes},
		{"sys.Subject = 'order.created'", yes},
		{"sys.To = 'warehouse'", yes},
		{"sys.ContentType = 'application/json'", yes},
		{"sys.SessionId = 'session-7'", yes},
		{"sys.SequenceNumber = 42", yes},
		{"sys.DeliveryCount = 1", yes},
		{"sys.Size > 200", yes},
		{"sys.TimeToLive = 90", yes},
		{"sys.TimeToLive > 89.5", yes},
		{"sys.ScheduledEnqueueTimeUtc IS NULL", yes},
	} {
		checkMatch(t, tc.expr, nil, m, tc.want, nil)
	}
}

func TestMatchParameters(t *testing.T) {
	m := sampleMessage()
	ts := func(t time.Time) *raftbusv1.PropertyValue {
		return &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_TimestampValue{TimestampValue: timestamppb.New(t)}}
	}
	params := map[string]*raftbusv1.PropertyValue{
		"@color":  {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "red"}},
		"limit":   {Value: &raftbusv1.PropertyValue_IntValue{IntValue: 10}},
		"@ratio":  {Value: &raftbusv1.PropertyValue_DoubleValue{DoubleValue: 2.5}},
		"@flag":   {Value: &raftbusv1.PropertyValue_BoolValue{BoolValue: true}},
		"@blob":   {Value: &raftbusv1.PropertyValue_BytesValue{BytesValue: []byte{1, 2, 3}}},
		"@pat":    {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "order%"}},
		"@esc":    {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "!"}},
		"@before": ts(enqueued.Add(-time.Second)),
		"@none":   {},
	}
	for _, tc := range []struct {
		expr string
		want result
	}{
		{"color = @color", yes},
		{"quantity > @limit", yes},
		{"price = @ratio", yes},
		{"urgent = @flag", yes},
		{"blob = @blob", yes},
		{"sys.Label LIKE @pat", yes},
		{"pattern LIKE '50!%%' ESCAPE @esc", yes},
		{"sys.EnqueuedTimeUtc > @before", yes},
		{"when >= @before AND when < sys.EnqueuedTimeUtc", no},
		{"color = @none", no},
		{"@none IS NULL", yes},
		{"color IN (@color, 'x')", yes},
	} {
		checkMatch(t, tc.expr, params, m, tc.want, nil)
	}
}

func TestMatchEvaluationErrors(t *testing.T) {
	m := sampleMessage()
	for _, tc := range []struct {
		expr string
		err  error
	}{
		{"color = 1", ErrTypeMismatch},
		{"quantity = '12'", ErrTypeMismatch},
		{"urgent = 1", ErrTypeMismatch},
		{"urgent > FALSE", ErrTypeMismatch},
		{"color > 1.5", ErrTypeMismatch},
		{"when = 1", ErrTypeMismatch},
		{"blob = 'x'", ErrTypeMismatch},
		{"quantity LIKE '1%'", ErrTypeMismatch},
		{"color IN (1, 2)", ErrTypeMismatch},
		{"color + 1 = 2", ErrTypeMismatch},
		{"color - 'x' = ''", ErrTypeMismatch},
		{"-color = 'x'", ErrTypeMismatch},
		{"urgent * 2 = 2", ErrTypeMismatch},
		{"quantity / zero = 1", ErrDivisionByZero},
		{"quantity % zero = 1", ErrDivisionByZero},
		{"big + 1 > 0", ErrOverflow},
		{"-big - 2 > 0", ErrOverflow},
		{"big * 2 > 0", ErrOverflow},
		{"-(-9223372036854775808) > 0", ErrOverflow},
		{"-9223372036854775808 / -1 > 0", ErrOverflow},
		{"color = 'blue' OR quantity = 'x'", ErrTypeMismatch},
		{"missing = 1 OR color = 1", ErrTypeMismatch},
	} {
		checkMatch(t, tc.expr, nil, m, fails, tc.err)
	}
}

func TestEvalErrorText(t *testing.T) {
	f, err := Parse("quantity > 10 AND color = 5", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Match(sampleMessage())
	want := "sql filter: evaluating '=' at position 24: type mismatch (string, int64)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestStringConcatenation(t *testing.T) {
	checkMatch(t, "color + '/' + sys.To = 'red/warehouse'", nil, sampleMessage(), yes, nil)
}

func TestMatchIntegerArithmeticEdges(t *testing.T) {
	m := sampleMessage()
	for _, expr := range []string{
		"-9223372036854775808 % -1 = 0",
		"-7 / 2 = -3",
		"-7 % 2 = -1",
		"9223372036854775807 - 1 = 9223372036854775806",
		"-9223372036854775807 - 1 = -9223372036854775808",
		"3037000499 * 3037000499 = 9223372030926249001",
		"big * -1 = -9223372036854775807",
	} {
		checkMatch(t, expr, nil, m, yes, nil)
	}
}

// The common path — a string property compared with a literal, and the
// typical two-comparison filter — must not allocate.
func TestMatchDoesNotAllocate(t *testing.T) {
	m := sampleMessage()
	for _, expr := range []string{
		"color = 'red'",
		"color = 'red' AND quantity > 10",
		"sys.Label LIKE 'order%'",
		"sys.Label LIKE 'o%r_c%d'",
		"color IN ('green', 'blue', 'red') OR EXISTS(missing)",
		"price * 2 > quantity - 20 AND sys.TimeToLive > 60",
	} {
		f, err := Parse(expr, nil)
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(200, func() {
			if ok, err := f.Match(m); !ok || err != nil {
				t.Fatalf("%q did not match: %v", expr, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%q: %v allocations per Match, want 0", expr, allocs)
		}
	}
}

func TestValueOfPropertyValue(t *testing.T) {
	ts := timestamppb.New(enqueued)
	for _, tc := range []struct {
		pv   *raftbusv1.PropertyValue
		want Value
	}{
		{nil, Null()},
		{&raftbusv1.PropertyValue{}, Null()},
		{&raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_StringValue{StringValue: "s"}}, StringValue("s")},
		{&raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_IntValue{IntValue: 7}}, IntValue(7)},
		{&raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_DoubleValue{DoubleValue: 1.5}}, FloatValue(1.5)},
		{&raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_BoolValue{BoolValue: true}}, BoolValue(true)},
		{&raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_BytesValue{BytesValue: []byte("b")}}, BytesValue([]byte("b"))},
		{&raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_TimestampValue{TimestampValue: ts}}, TimeValue(enqueued)},
	} {
		got := ValueOf(tc.pv)
		if got.Kind() != tc.want.Kind() || (!got.IsNull() && !got.Equal(tc.want)) {
			t.Errorf("ValueOf(%v) = %v, want %v", tc.pv, got, tc.want)
		}
	}
	if tm, ok := TimeValue(enqueued).Time(); !ok || !tm.Equal(enqueued) {
		t.Errorf("Time() = %v, want %v", tm, enqueued)
	}
}
