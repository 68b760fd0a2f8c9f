package amqp

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestCodecRoundTrips(t *testing.T) {
	ts := time.UnixMilli(1_700_000_000_123).UTC()
	cases := []any{
		nil, true, false, uint8(7), uint16(65000), uint32(0), uint32(200), uint32(70000),
		uint64(0), uint64(255), uint64(1 << 40), int8(-3), int16(-300), int32(-1), int32(100000),
		int64(-128), int64(1 << 50), float32(1.5), float64(-2.25), Char('é'), ts,
		UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		[]byte{}, []byte("bin"), bytes.Repeat([]byte{1}, 300), "", "héllo", string(bytes.Repeat([]byte("s"), 1000)),
		Symbol("com.microsoft:dead-letter"),
		[]any{}, []any{int64(1), "two", Symbol("three"), nil, []any{true}},
		map[any]any{Symbol("k"): "v", "s": int32(2), int64(3): []any{}},
		Array{Symbol("a"), Symbol("b")}, Array{int64(1), int64(2)}, Array{ts, ts}, Array{UUID{1}, UUID{2}},
		Array{[]byte("x"), []byte("yy")}, Array{"s", "t"}, Array{true, false}, Array{[]any{int32(1)}, []any{}},
		Array{map[any]any{"a": int32(1)}},
		Described{Descriptor: uint64(0x24), Value: []any{}},
		Described{Descriptor: Symbol("com.microsoft:session-filter"), Value: "s1"},
	}
	for _, v := range cases {
		b, err := Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", v, err)
		}
		got, n, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("Unmarshal(Marshal(%#v)): %v", v, err)
		}
		if n != len(b) {
			t.Errorf("%#v: decoded %d of %d bytes", v, n, len(b))
		}
		want := v
		if _, ok := v.([]any); ok && len(v.([]any)) == 0 {
			want = []any{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip of %#v gave %#v", v, got)
		}
	}
}

func TestCodecDecodesEveryWidth(t *testing.T) {
	// The compact and wide forms of one value decode alike.
	cases := []struct {
		b    []byte
		want any
	}{
		{[]byte{0x43}, uint32(0)},
		{[]byte{0x52, 5}, uint32(5)},
		{[]byte{0x70, 0, 0, 0, 5}, uint32(5)},
		{[]byte{0x44}, uint64(0)},
		{[]byte{0x53, 5}, uint64(5)},
		{[]byte{0x54, 0xff}, int32(-1)},
		{[]byte{0x55, 0xfe}, int64(-2)},
		{[]byte{0x56, 1}, true},
		{[]byte{0xa1, 2, 'h', 'i'}, "hi"},
		{[]byte{0xb1, 0, 0, 0, 2, 'h', 'i'}, "hi"},
		{[]byte{0xa3, 1, 'x'}, Symbol("x")},
		{[]byte{0xc0, 3, 2, 0x41, 0x40}, []any{true, nil}},
		{[]byte{0xc1, 5, 2, 0xa1, 1, 'k', 0x41}, map[any]any{"k": true}},
		{[]byte{0xe0, 4, 2, 0x50, 1, 2}, Array{uint8(1), uint8(2)}},
		{[]byte{0xe0, 6, 2, 0xa3, 1, 'a', 1, 'b'}, Array{Symbol("a"), Symbol("b")}},
		{[]byte{0x83, 0, 0, 0, 0, 0, 0, 0, 1}, time.UnixMilli(1).UTC()},
	}
	for _, c := range cases {
		got, _, err := Unmarshal(c.b)
		if err != nil {
			t.Fatalf("Unmarshal(% x): %v", c.b, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Unmarshal(% x) = %#v, want %#v", c.b, got, c.want)
		}
	}
}

func TestCodecRejectsMalformedInput(t *testing.T) {
	cases := map[string][]byte{
		"empty":                 {},
		"unknown code":          {0x99},
		"short uint":            {0x70, 0, 0},
		"string past the end":   {0xa1, 5, 'a'},
		"list count lies":       {0xd0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff},
		"list size too small":   {0xd0, 0, 0, 0, 1, 0},
		"list leftover bytes":   {0xc0, 3, 1, 0x40, 0x40},
		"odd map":               {0xc1, 2, 1, 0x40},
		"binary map key":        {0xc1, 5, 2, 0xa0, 1, 'k', 0x40},
		"bad boolean":           {0x56, 2},
		"bad descriptor":        {0x00, 0xa1, 1, 'x', 0x40},
		"huge zero-width array": {0xf0, 0, 0, 0, 5, 0x7f, 0xff, 0xff, 0xff, 0x40},
		"array count lies":      {0xe0, 2, 0xff, 0x50},
	}
	deep := []byte{}
	for i := 0; i < 100; i++ {
		deep = append(deep, 0x00, 0x53, 1)
	}
	cases["too deep"] = append(deep, 0x40)
	for name, b := range cases {
		if _, _, err := Unmarshal(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Unmarshal(% x) = %v, want ErrMalformed", name, b, err)
		}
	}
}

func TestPerformativesRoundTrip(t *testing.T) {
	last := uint32(9)
	perfs := []performative{
		&open{ContainerID: "c", MaxFrameSize: 65536, ChannelMax: 255, IdleTimeout: 1000},
		&attach{Name: "l", Handle: 3, Role: roleReceiver, SndSettleMode: SenderSettleUnsettled, RcvSettleMode: ReceiverSettleSecond,
			Source: &Source{Address: "q", Filter: map[Symbol]any{"f": Described{Descriptor: uint64(7), Value: "s"}}}, Target: &Target{Address: "t"}},
		&disposition{Role: roleReceiver, First: 2, Last: &last, Settled: true, State: (&Rejected{Error: &Error{Condition: "x", Description: "y", Info: map[Symbol]any{"r": "z"}}}).outcome()},
		&detach{Handle: 1, Closed: true, Error: &Error{Condition: ErrCondNotFound, Description: "no"}},
	}
	for _, p := range perfs {
		b, err := Marshal(p.described())
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodePerformative(b)
		if err != nil {
			t.Fatalf("%T: %v", p, err)
		}
		// Re-encoding what was decoded gives the same bytes (raw fields
		// of the termini included).
		b2, err := Marshal(got.(performative).described())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, b2) {
			t.Errorf("%T: re-encoded % x, first % x", p, b2, b)
		}
	}
}

func FuzzFrameDecoder(f *testing.F) {
	seed, _ := encodeFrame(frameTypeAMQP, 0, &open{ContainerID: "x", MaxFrameSize: 512}, nil)
	f.Add(seed)
	tr, _ := encodeFrame(frameTypeAMQP, 1, &transfer{Handle: 1, DeliveryTag: []byte{1}}, []byte("payload"))
	f.Add(tr)
	f.Add([]byte{0, 0, 0, 8, 2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := newFrameReader(bytes.NewReader(b))
		fr.Max = 1 << 16
		for {
			fr, err := fr.read()
			if err != nil {
				return
			}
			if len(fr.Body) > 0 {
				decodePerformative(fr.Body) // must not panic
			}
		}
	})
}
