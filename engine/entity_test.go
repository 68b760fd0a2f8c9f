package engine

import (
	"strings"
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestNormalizeQueuePropertiesAppliesDefaults(t *testing.T) {
	p, err := NormalizeQueueProperties(&raftbusv1.QueueProperties{Name: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if p.GetName() != "q" || p.GetLockDuration().AsDuration() != time.Minute || p.GetMaxDeliveryCount() != 10 ||
		p.GetDuplicateDetectionHistoryTimeWindow().AsDuration() != 10*time.Minute || p.GetMaxSizeInMegabytes() != 1024 ||
		p.GetMaxMessageSizeInKilobytes() != 256 || p.GetDefaultMessageTimeToLive().AsDuration() != UnlimitedTimeToLive ||
		p.RequiresSession == nil || p.GetPartitionCount() != 1 || !p.GetEnableBatchedOperations() ||
		p.GetAutoDeleteOnIdle().AsDuration() != NeverAutoDelete {
		t.Fatalf("defaults %v", p)
	}
}

func TestNormalizeQueuePropertiesRejectsOutOfRange(t *testing.T) {
	for name, p := range map[string]*raftbusv1.QueueProperties{
		"lock too long":      {LockDuration: dur(6 * time.Minute)},
		"lock zero":          {LockDuration: dur(0)},
		"no deliveries":      {MaxDeliveryCount: ptr[int32](0)},
		"window too short":   {DuplicateDetectionHistoryTimeWindow: dur(time.Second)},
		"size zero":          {MaxSizeInMegabytes: ptr[int64](0)},
		"message size large": {MaxMessageSizeInKilobytes: ptr[int64](MaxMaxMessageSizeInKilobytes + 1)},
		"ttl negative":       {DefaultMessageTimeToLive: dur(-time.Second)},
		"idle below minimum": {AutoDeleteOnIdle: dur(MinAutoDeleteOnIdle - time.Second)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NormalizeQueueProperties(p)
			if e, ok := err.(*Error); !ok || e.Reason != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
				t.Fatalf("error %v", err)
			}
		})
	}
}

// TestMessageSizeOverTheReplicatedLimitIsRefusedButStillApplied checks the
// two sides of the limit on message sizes: a new setting over the largest
// message raftbus replicates is refused, with the reason in the message,
// while a larger one stored before the limit existed still configures the
// entity (refusing it would lose the entity on replay or restore).
func TestMessageSizeOverTheReplicatedLimitIsRefusedButStillApplied(t *testing.T) {
	for _, normalize := range []func(int64) error{
		func(kb int64) error {
			_, err := NormalizeQueueProperties(&raftbusv1.QueueProperties{MaxMessageSizeInKilobytes: &kb})
			return err
		},
		func(kb int64) error {
			_, err := NormalizeTopicProperties(&raftbusv1.TopicProperties{MaxMessageSizeInKilobytes: &kb})
			return err
		},
	} {
		if err := normalize(MaxMaxMessageSizeInKilobytes); err != nil {
			t.Fatalf("the largest size refused: %v", err)
		}
		err := normalize(2048)
		if e, ok := err.(*Error); !ok || e.Reason != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT || !strings.Contains(e.Message, "at most 1 MiB") {
			t.Fatalf("2048 KB: %v, want INVALID_ARGUMENT saying why", err)
		}
	}
	h := newHarness(t, &raftbusv1.QueueProperties{MaxMessageSizeInKilobytes: ptr[int64](102400)})
	h.ok(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: testTopic, Topic: &raftbusv1.TopicProperties{MaxMessageSizeInKilobytes: ptr[int64](102400)},
	}}})
}

func TestConfigureEntityUpdatesAndDeletes(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(1)
	h.configure(testQueue, &raftbusv1.QueueProperties{LockDuration: dur(5 * time.Second)})
	if got := h.lock(1); got[0].GetLockedUntil().AsTime().UnixMilli() != h.now+5000 {
		t.Fatalf("update not applied: %v", got[0].GetLockedUntil())
	}
	h.ok(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testQueue, Delete: true}}})
	if _, err := h.e.RuntimeProperties(testQueue); err == nil {
		t.Fatal("deleted entity still there")
	}
	if _, ok := h.e.NextDeadline(); ok {
		t.Fatal("deleted entity's lock still has a deadline")
	}
	h.fails(sendCmd(&raftbusv1.Message{}), raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND)
}

func TestNextDeadlineIsTheEarliestTimeDrivenWork(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(30 * time.Second), DefaultMessageTimeToLive: dur(time.Hour)})
	if _, ok := h.e.NextDeadline(); ok {
		t.Fatal("an empty engine has work")
	}
	h.send(&raftbusv1.Message{MessageId: "a", TimeToLive: dur(time.Minute)}, &raftbusv1.Message{MessageId: "b", ScheduledEnqueueTime: timestamp(h.now + 45_000)})
	next := func() int64 {
		d, ok := h.e.NextDeadline()
		if !ok {
			t.Fatal("no deadline")
		}
		return d - startMs
	}
	if got := next(); got != 45_000 {
		t.Fatalf("deadline +%d, want the activation at +45000", got)
	}
	h.lock(1)
	if got := next(); got != 30_000 {
		t.Fatalf("deadline +%d, want the lock expiry at +30000", got)
	}
}

func TestOldestAvailableIsWhatAReceiveGetsFirst(t *testing.T) {
	h := newHarness(t, nil)
	if _, ok := h.e.OldestAvailable(testQueue, mainQueue); ok {
		t.Fatal("a message available before any send")
	}
	first := h.now
	h.sendN(1)
	h.advance(time.Second)
	h.sendN(1)
	if ms, ok := h.e.OldestAvailable(testQueue, mainQueue); !ok || ms != first {
		t.Fatalf("oldest available %d, %v; want the first send's %d", ms, ok, first)
	}
	locked := h.lock(1)
	if ms, ok := h.e.OldestAvailable(testQueue, mainQueue); !ok || ms != first+1000 {
		t.Fatalf("with the first locked, oldest available %d, %v; want the second send's %d", ms, ok, first+1000)
	}
	// Abandoned, the first is available again, in its place.
	h.settle(locked[0], enginev1.Disposition_DISPOSITION_ABANDON)
	if ms, ok := h.e.OldestAvailable(testQueue, mainQueue); !ok || ms != first {
		t.Fatalf("after the abandon, oldest available %d, %v; want %d", ms, ok, first)
	}
	h.lock(2)
	if _, ok := h.e.OldestAvailable(testQueue, mainQueue); ok {
		t.Fatal("a message available with both locked")
	}
	if _, ok := h.e.OldestAvailable("nope", mainQueue); ok {
		t.Fatal("a message available in an unknown entity")
	}
}

func TestHasAvailableFollowsTheAvailableSet(t *testing.T) {
	h := newHarness(t, nil)
	if h.e.HasAvailable(testQueue, mainQueue) || h.e.HasAvailable("nope", mainQueue) {
		t.Fatal("available before any send")
	}
	h.sendN(1)
	if !h.e.HasAvailable(testQueue, mainQueue) || h.e.HasAvailable(testQueue, deadLetter) {
		t.Fatal("HasAvailable after a send")
	}
	h.lock(1)
	if h.e.HasAvailable(testQueue, mainQueue) {
		t.Fatal("a locked message counts as available")
	}
}
