package console

import (
	"testing"

	"github.com/raftbus/raftbus/client"
)

func TestShownPropertiesNameExactNumberTypes(t *testing.T) {
	s := show(&client.ReceivedMessage{ApplicationProperties: map[string]any{
		"a": int32(5), "b": int64(5), "c": uint8(7), "d": float32(0.5), "e": "x"}})
	want := []string{"a:int32 = 5", "b = 5", "c:uint8 = 7", "d:float32 = 0.5", "e = x"}
	if len(s.Properties) != len(want) {
		t.Fatalf("shown %q, want %q", s.Properties, want)
	}
	for i := range want {
		if s.Properties[i] != want[i] {
			t.Fatalf("shown %q, want %q", s.Properties, want)
		}
	}
}
