package engine

import (
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const quotaExceeded = raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED

// withQuota gives testQueue (with props) a size limit of limit bytes, its
// partition's share of max_size_in_megabytes.
func (h *harness) withQuota(props *raftbusv1.QueueProperties, limit int64) {
	h.t.Helper()
	h.ok(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: testQueue, Properties: props, MaxSizeBytes: limit,
	}}})
}

func TestQuotaCountsEveryMessageHeldWhateverItsState(t *testing.T) {
	h := newHarness(t, nil)
	h.withQuota(nil, 1000)
	props := map[string]*raftbusv1.PropertyValue{"k": stringProp("v")}
	h.send(&raftbusv1.Message{MessageId: "a", Body: make([]byte, 200), ApplicationProperties: props})
	used := h.counts().GetSizeInBytes()
	if used <= 201 {
		t.Fatalf("a message of 200 bytes with an id and a property counts %d bytes", used)
	}
	h.send(&raftbusv1.Message{MessageId: "b", Body: make([]byte, 200)},
		&raftbusv1.Message{MessageId: "c", Body: make([]byte, 200), ScheduledEnqueueTime: timestamp(h.now + 60_000)})
	ms := h.lock(2)
	h.settle(ms[0], deadLetterIt)
	h.settle(ms[1], deferIt)
	if used = h.counts().GetSizeInBytes(); used < 3*201 {
		t.Fatalf("three messages of 200 bytes and more count %d bytes", used)
	}
	// Dead-lettered, deferred and scheduled messages all count: what is
	// left is what fits.
	left := 1000 - used
	h.fails(sendCmd(&raftbusv1.Message{Body: make([]byte, left+1)}), quotaExceeded)
	h.send(&raftbusv1.Message{Body: make([]byte, left)})
	h.fails(sendCmd(&raftbusv1.Message{Body: make([]byte, 1)}), quotaExceeded)
	// Completing the dead letter makes room.
	dl := h.lockDeadLetters(1)
	h.ok(settleCmd(deadLetter, dl[0].GetLockToken(), complete))
	h.send(&raftbusv1.Message{Body: make([]byte, 1)})
}

func TestSessionStateCountsTowardsTheQuota(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.withQuota(&raftbusv1.QueueProperties{RequiresSession: ptr(true), LockDuration: dur(30 * time.Second)}, 3000)
	a := h.accept("a")
	h.ok(setStateCmd(a, make([]byte, 2000)))
	if got := h.counts().GetSizeInBytes(); got != 2000 {
		t.Fatalf("size %d, want the 2000 bytes of state", got)
	}
	h.send(&raftbusv1.Message{SessionId: "b", Body: make([]byte, 900)})
	used := h.counts().GetSizeInBytes()
	left := 3000 - used
	h.fails(sendCmd(&raftbusv1.Message{SessionId: "b", Body: make([]byte, left)}), quotaExceeded)
	h.fails(setStateCmd(a, make([]byte, 2000+left+1)), quotaExceeded)
	h.ok(setStateCmd(a, make([]byte, 2000+left)))
	h.fails(sendCmd(&raftbusv1.Message{SessionId: "b"}), quotaExceeded)
	// A state may always shrink; clearing it makes room.
	h.ok(setStateCmd(a, make([]byte, 10)))
	h.ok(setStateCmd(a, nil))
	h.send(&raftbusv1.Message{SessionId: "b", Body: make([]byte, 2000)})
}

func TestSubscriptionSessionStatesCountTowardsTheTopicsQuota(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.ok(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: testTopic, Topic: &raftbusv1.TopicProperties{}, MaxSizeBytes: 1000,
	}}})
	h.subscribe("s", &raftbusv1.SubscriptionProperties{RequiresSession: ptr(true)})
	r := h.ok(&enginev1.Command{Body: &enginev1.Command_AcceptSession{AcceptSession: &enginev1.AcceptSession{EntityPath: subPath("s"), SessionId: "k"}}}).GetAcceptSession()
	set := func(n int) *enginev1.Command {
		return &enginev1.Command{Body: &enginev1.Command_SetSessionState{SetSessionState: &enginev1.SetSessionState{
			EntityPath: subPath("s"), SessionId: "k", LockToken: r.GetLockToken(), State: make([]byte, n),
		}}}
	}
	h.ok(set(900))
	if got := h.countsOf(testTopic).GetSizeInBytes(); got != 900 {
		t.Fatalf("the topic holds %d bytes, want its subscription's 900 of state", got)
	}
	h.fails(publishCmd(&raftbusv1.Message{SessionId: "k", Body: make([]byte, 200)}), quotaExceeded)
	h.publish(&raftbusv1.Message{SessionId: "k", Body: make([]byte, 50)})
	h.fails(set(1000), quotaExceeded)
}

// Entries written before versionQuotaCountsSessionState replay as they
// were applied: session states did not count.
func TestEntriesBeforeVersion3DoNotCountSessionState(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.withQuota(&raftbusv1.QueueProperties{RequiresSession: ptr(true), LockDuration: dur(30 * time.Second)}, 3000)
	h.version = ptr[uint32](versionQuotaCountsSessionState - 1)
	a := h.accept("a")
	h.ok(setStateCmd(a, make([]byte, 2500)))
	h.send(&raftbusv1.Message{SessionId: "b", Body: make([]byte, 2000)})
	h.ok(setStateCmd(a, make([]byte, 2800)))
	h.version = nil
	h.fails(sendCmd(&raftbusv1.Message{SessionId: "b", Body: make([]byte, 1)}), quotaExceeded)
	h.fails(setStateCmd(a, make([]byte, 2801)), quotaExceeded)
}
