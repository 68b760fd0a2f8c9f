package engine

import "testing"

// TestStoredMessageStaysWithinMemoryBudget holds 100,000 messages with
// 36-character ids and checks the heap they take beyond their bodies.
// Duplicate detection adds an entry per id in its window, holding what the
// id's first copy got (sequence number, enqueue time).
func TestStoredMessageStaysWithinMemoryBudget(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("memory is measured without the race detector and not in short mode")
	}
	for dup, budget := range map[bool]float64{false: 300, true: 350} {
		if got := storedBytesPerMessage(t, 100_000, dup); got > budget {
			t.Errorf("duplicate detection %v: %.0f bytes per stored message, budget %.0f", dup, got, budget)
		} else {
			t.Logf("duplicate detection %v: %.0f bytes per stored message", dup, got)
		}
	}
}
