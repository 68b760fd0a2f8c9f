package cluster

import (
	"errors"
	"testing"
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestFirstAcrossServesWhatAnyPartitionHasWhileAnotherIsDown(t *testing.T) {
	down := busy("partition 0 has no reachable leader")
	asked := 0
	got, err := firstAcross(0, 3, time.Second, func(id uint32, wait time.Duration) (string, bool, error) {
		asked++
		switch id {
		case 0:
			return "", false, down
		case 2:
			return "message of 2", true, nil
		}
		return "", false, nil
	})
	if err != nil || got != "message of 2" || asked != 3 {
		t.Fatalf("got %q, %v after %d asks; want partition 2's message", got, err, asked)
	}
}

func TestFirstAcrossEndsEmptyWhenTheOthersHaveNothing(t *testing.T) {
	got, err := firstAcross(1, 2, 120*time.Millisecond, func(id uint32, wait time.Duration) (string, bool, error) {
		if id == 0 {
			return "", false, busy("no leader")
		}
		time.Sleep(wait) // a partition with nothing waits out its slice
		return "", false, nil
	})
	if err != nil || got != "" {
		t.Fatalf("got %q, %v; want an empty answer", got, err)
	}
}

func TestFirstAcrossFailsWhenNoPartitionAnswers(t *testing.T) {
	_, err := firstAcross(0, 2, time.Minute, func(id uint32, wait time.Duration) (string, bool, error) {
		return "", false, busy("partition %d has no reachable leader", id)
	})
	if asAPIError(err).reason != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY {
		t.Fatalf("got %v; want SERVER_BUSY at once", err)
	}
}

func TestFirstAcrossStopsAtAnUnknownOutcome(t *testing.T) {
	unknown := errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "connection broke")
	asked := 0
	_, err := firstAcross(0, 3, time.Second, func(id uint32, wait time.Duration) (string, bool, error) {
		asked++
		if id == 0 {
			return "", false, unknown
		}
		return "message", true, nil
	})
	if !errors.Is(err, unknown) || asked != 1 {
		t.Fatalf("got %v after %d asks; want the unknown outcome of partition 0, asking no further", err, asked)
	}
}
