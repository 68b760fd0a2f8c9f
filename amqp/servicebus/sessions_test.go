package servicebus

import (
	"testing"
	"time"
)

// The answer that no session became available leaves before the client's
// own deadline (the timeout it sent, plus at most a few milliseconds).
func TestAcceptNextAnswersBeforeTheClientGivesUp(t *testing.T) {
	for _, c := range []struct {
		timeoutMs uint32
		want      time.Duration
	}{
		{0, acceptNextTimeout},
		{3000, 2850 * time.Millisecond},
		{60000, 59750 * time.Millisecond},
		{100, 95 * time.Millisecond},
	} {
		if got := acceptNextWait(c.timeoutMs); got != c.want {
			t.Errorf("timeout %d ms: waits %v, want %v", c.timeoutMs, got, c.want)
		}
	}
}
