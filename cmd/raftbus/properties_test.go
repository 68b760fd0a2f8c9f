package main

import (
	"reflect"
	"testing"
)

func TestTypedProperties(t *testing.T) {
	got, err := parseProperties([]string{"s=x", "n:int=7", "a:int8=-8", "b:int16=-16", "c:int32=-32", "d:int64=-64",
		"e:uint8=8", "f:uint16=16", "g:uint32=32", "h:uint64=18446744073709551615", "i:float32=0.5", "j:float64=1.5", "k:float=2.5"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"s": "x", "n": int64(7), "a": int8(-8), "b": int16(-16), "c": int32(-32), "d": int64(-64),
		"e": uint8(8), "f": uint16(16), "g": uint32(32), "h": uint64(18446744073709551615), "i": float32(0.5), "j": 1.5, "k": 2.5}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %#v\nwant %#v", got, want)
	}
	for _, bad := range []string{"a:int8=128", "e:uint8=-1", "f:uint16=65536", "c:int32=2147483648", "x:int9=1"} {
		if _, err := parseProperties([]string{bad}); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
	if s := propertyText("c", int32(5)); s != "c:int32: 5" {
		t.Errorf("int32 printed %q", s)
	}
	if s := propertyText("n", int64(5)); s != "n: 5" {
		t.Errorf("int64 printed %q", s)
	}
}
