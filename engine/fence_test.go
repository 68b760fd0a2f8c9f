package engine

import (
	"bytes"
	"strings"
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// atGeneration stamps a fenced command with the metadata generation it was
// made from.
func atGeneration(cmd *enginev1.Command, g uint64) *enginev1.Command {
	switch b := cmd.GetBody().(type) {
	case *enginev1.Command_ConfigureEntity:
		b.ConfigureEntity.Generation = g
	case *enginev1.Command_AddRule:
		b.AddRule.Generation = g
	case *enginev1.Command_RemoveRule:
		b.RemoveRule.Generation = g
	}
	return cmd
}

// TestOlderGenerationIsRefusedAndChangesNothing replays what a partition
// leader with an outdated view of the metadata would propose after a newer
// view was applied: every command of the older generation is refused and
// the state, clock included, stays exactly as it was.
func TestOlderGenerationIsRefusedAndChangesNothing(t *testing.T) {
	h := &harness{t: t, e: New(0, 1), now: startMs}
	h.ok(atGeneration(configureTopicCmd(nil), 1))
	h.ok(atGeneration(subscribeCmd("audit", nil), 2))
	h.ok(atGeneration(subscribeCmd("billing", nil), 3))
	h.ok(atGeneration(addRuleCmd("audit", sqlRule("big", "size > 10")), 3))
	h.publish(&raftbusv1.Message{MessageId: "a", Body: []byte("kept")})
	if g := h.e.Generation(subPath("audit")); g != 3 {
		t.Fatalf("generation of a subscription: %d, want its topic's 3", g)
	}

	before := h.e.Digest()
	// A refused command must not even move the clock.
	h.advance(10 * time.Minute)
	for name, cmd := range map[string]*enginev1.Command{
		"delete subscription":    deleteCmd(subPath("billing")),
		"delete topic":           deleteCmd(testTopic),
		"reconfigure topic":      configureTopicCmd(&raftbusv1.TopicProperties{MaxSizeInMegabytes: ptr[int64](1)}),
		"reconfigure sub":        subscribeCmd("audit", &raftbusv1.SubscriptionProperties{MaxDeliveryCount: ptr[int32](1)}),
		"create sub":             subscribeCmd("new", nil),
		"add rule":               addRuleCmd("audit", sqlRule("other", "1=1")),
		"remove rule":            removeRuleCmd("audit", "big"),
		"remove another's rule":  removeRuleCmd("billing", DefaultRuleName),
		"unfenced configuration": atGeneration(configureTopicCmd(nil), 0),
	} {
		if name != "unfenced configuration" {
			atGeneration(cmd, 2)
		}
		e := h.fails(cmd, raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY)
		if !strings.Contains(e.GetMessage(), "generation 3") || !strings.Contains(e.GetMessage(), "behind") {
			t.Fatalf("%s: unclear refusal %q", name, e.GetMessage())
		}
		if h.e.Digest() != before {
			t.Fatalf("%s: a refused command changed the state", name)
		}
	}
	if n := len(h.peekSub("billing", mainQueue)); n != 1 {
		t.Fatalf("subscription billing holds %d messages after refused commands, want 1", n)
	}

	// The commands of the newest generation, and of later ones, pass.
	h.ok(atGeneration(subscribeCmd("billing", &raftbusv1.SubscriptionProperties{MaxDeliveryCount: ptr[int32](3)}), 3))
	h.ok(atGeneration(deleteCmd(subPath("billing")), 4))
	if g := h.e.Generation(testTopic); g != 4 {
		t.Fatalf("generation after a newer command: %d, want 4", g)
	}
	h.fails(atGeneration(subscribeCmd("billing", nil), 3), raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY)
}

func TestGenerationsAreKeptPerEntity(t *testing.T) {
	h := newHarness(t, nil)
	h.ok(atGeneration(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: testQueue, Properties: &raftbusv1.QueueProperties{},
	}}}, 7))
	// Another entity of the partition has a fence of its own.
	h.ok(atGeneration(configureTopicCmd(nil), 1))
	h.ok(atGeneration(subscribeCmd("audit", nil), 1))
	if g := h.e.Generation(testQueue); g != 7 {
		t.Fatalf("queue generation %d, want 7", g)
	}
}

func TestGenerationOutlivesTheEntityAndSurvivesASnapshot(t *testing.T) {
	h := &harness{t: t, e: New(0, 1), now: startMs}
	h.ok(atGeneration(configureTopicCmd(nil), 5))
	h.ok(atGeneration(deleteCmd(testTopic), 6))
	// An outdated view that still has the topic cannot bring it back.
	h.fails(atGeneration(configureTopicCmd(nil), 5), raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY)

	h.ok(atGeneration(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: testQueue, Properties: &raftbusv1.QueueProperties{},
	}}}, 2))
	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored := New(0, 1)
	if err := restored.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if restored.Digest() != h.e.Digest() {
		t.Fatal("digest differs after restore")
	}
	h.e = restored
	h.fails(atGeneration(configureTopicCmd(nil), 5), raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY)
	h.fails(atGeneration(deleteCmd(testQueue), 1), raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY)
	h.ok(atGeneration(deleteCmd(testQueue), 2))
}
