package engine

import "testing"

// TestStoredMessageStaysWithinMemoryBudget holds 100,000 messages with
// 36-character ids and checks the heap they take beyond their bodies.
func TestStoredMessageStaysWithinMemoryBudget(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("memory is measured without the race detector and not in short mode")
	}
	for _, dup := range []bool{false, true} {
		if got := storedBytesPerMessage(t, 100_000, dup); got > 300 {
			t.Errorf("duplicate detection %v: %.0f bytes per stored message, budget 300", dup, got)
		} else {
			t.Logf("duplicate detection %v: %.0f bytes per stored message", dup, got)
		}
	}
}
