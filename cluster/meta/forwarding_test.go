package meta

import (
	"strings"
	"testing"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func fwdQueue(name, to, dlqTo string, create bool) *clusterv1.MetaCommand {
	return &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutQueue{PutQueue: &clusterv1.PutQueue{
		Queue:  &raftbusv1.QueueProperties{Name: name, ForwardTo: to, ForwardDeadLetteredMessagesTo: dlqTo},
		Create: create, CheckForwarding: true,
	}}}
}

func fwdTopic(name string) *clusterv1.MetaCommand {
	return &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutTopic{PutTopic: &clusterv1.PutTopic{
		Topic: &raftbusv1.TopicProperties{Name: name}, Create: true,
	}}}
}

func fwdSubscription(topic, name, to, dlqTo string, create bool) *clusterv1.MetaCommand {
	return &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutSubscription{PutSubscription: &clusterv1.PutSubscription{
		Subscription: &raftbusv1.SubscriptionProperties{TopicName: topic, SubscriptionName: name, ForwardTo: to, ForwardDeadLetteredMessagesTo: dlqTo},
		Create:       create, CheckForwarding: true,
	}}}
}

func deleteEntity(name string) *clusterv1.MetaCommand {
	return &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteEntity{DeleteEntity: &clusterv1.DeleteEntity{Name: name}}}
}

// TestForwardingIsCheckedWhenConfigured runs each case on a cluster with
// queues q1..q6 (q1 -> q2 -> q3 forward) and a topic t with a
// subscription s forwarding to q1: the last command is refused with
// INVALID_ARGUMENT and a message containing want, or accepted when want is
// empty.
func TestForwardingIsCheckedWhenConfigured(t *testing.T) {
	base := []*clusterv1.MetaCommand{addNode("n1"),
		fwdQueue("q3", "", "", true), fwdQueue("q2", "q3", "", true), fwdQueue("q1", "q2", "", true),
		fwdQueue("q4", "", "", true), fwdQueue("q5", "", "", true), fwdQueue("q6", "", "", true),
		fwdTopic("t"), fwdSubscription("t", "s", "q1", "", true),
	}
	cases := []struct {
		name string
		cmds []*clusterv1.MetaCommand
		want string
	}{
		{"a queue forwarding to itself", []*clusterv1.MetaCommand{fwdQueue("q4", "q4", "", false)}, "cannot forward to itself"},
		{"a new queue forwarding to itself", []*clusterv1.MetaCommand{fwdQueue("x", "x", "", true)}, "cannot forward to itself"},
		{"dead letters to the entity itself", []*clusterv1.MetaCommand{fwdQueue("q4", "", "q4", false)}, "cannot forward to itself"},
		{"to a missing entity", []*clusterv1.MetaCommand{fwdQueue("x", "nowhere", "", true)}, `"nowhere", which is not an existing queue or topic`},
		{"dead letters to a missing entity", []*clusterv1.MetaCommand{fwdQueue("q4", "", "nowhere", false)}, "not an existing queue or topic"},
		{"to a subscription", []*clusterv1.MetaCommand{fwdQueue("q4", "t/subscriptions/s", "", false)}, "not an existing queue or topic"},
		{"a loop of two queues", []*clusterv1.MetaCommand{fwdQueue("q3", "q1", "", false)}, "loop: q3 -> q1 -> q2 -> q3"},
		{"a loop through a topic", []*clusterv1.MetaCommand{fwdQueue("q3", "t", "", false)}, "loop: q3 -> t -> t/subscriptions/s -> q1 -> q2 -> q3"},
		{"a subscription forwarding to its topic", []*clusterv1.MetaCommand{fwdSubscription("t", "s2", "t", "", true)}, "loop"},
		{"a loop through dead-letter forwarding", []*clusterv1.MetaCommand{fwdQueue("q3", "", "q1", false)}, "loop"},
		{"four hops", []*clusterv1.MetaCommand{fwdQueue("q3", "q4", "", false)}, ""},
		{"five hops", []*clusterv1.MetaCommand{fwdQueue("q4", "q5", "", false), fwdQueue("q3", "q4", "", false)}, "chain of 5 hops"},
		{"five hops through a subscription", []*clusterv1.MetaCommand{fwdQueue("q4", "t", "", false), fwdQueue("q5", "q4", "", false)}, "chain of 5 hops"},
		{"five hops through dead-letter forwarding", []*clusterv1.MetaCommand{fwdQueue("q4", "t", "", false), fwdQueue("q5", "", "q4", false)}, "chain of 5 hops"},
		{"a chain reaching a new subscription", []*clusterv1.MetaCommand{fwdQueue("q4", "t", "", false), fwdSubscription("t", "s2", "q6", "", true)}, ""},
		{"too long once a subscription is added", []*clusterv1.MetaCommand{fwdQueue("q6", "q3", "", false), fwdQueue("q5", "q6", "", false),
			fwdQueue("q4", "q5", "", false), fwdQueue("x", "t", "", true), fwdSubscription("t", "s2", "q4", "", true)}, "chain of 5 hops"},
		{"to a queue and dead letters elsewhere", []*clusterv1.MetaCommand{fwdQueue("q4", "q5", "q6", false)}, ""},
		{"a target deleted and created again with a loop", []*clusterv1.MetaCommand{deleteEntity("q3"), fwdQueue("q3", "q1", "", true)}, "loop"},
		{"a topic with no subscription", []*clusterv1.MetaCommand{fwdTopic("t2"), fwdQueue("q4", "t2", "", false)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := NewFSM()
			for i, r := range applyAll(t, f, base...) {
				if r.GetErrorReason() != 0 {
					t.Fatalf("setup command %d: %v %s", i, r.GetErrorReason(), r.GetErrorMessage())
				}
			}
			before := snapshotBytes(t, f)
			var res *clusterv1.MetaResult
			for i, cmd := range c.cmds {
				res = f.Apply(entry(t, uint64(len(base)+i+1), cmd)).(*clusterv1.MetaResult)
				if i < len(c.cmds)-1 && res.GetErrorReason() != 0 {
					t.Fatalf("command %d: %v %s", i, res.GetErrorReason(), res.GetErrorMessage())
				}
			}
			if c.want == "" {
				if res.GetErrorReason() != 0 {
					t.Fatalf("refused: %v %s", res.GetErrorReason(), res.GetErrorMessage())
				}
				return
			}
			if res.GetErrorReason() != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT || !strings.Contains(res.GetErrorMessage(), c.want) {
				t.Fatalf("got %v %q, want INVALID_ARGUMENT with %q", res.GetErrorReason(), res.GetErrorMessage(), c.want)
			}
			if len(c.cmds) == 1 && string(before) != string(snapshotBytes(t, f)) {
				t.Fatal("a refused change changed the state")
			}
		})
	}
}

// TestForwardingOfOldCommandsIsNotChecked: a command written before the
// check existed keeps its meaning when replayed, so that replicas on
// either build agree.
func TestForwardingOfOldCommandsIsNotChecked(t *testing.T) {
	old := fwdQueue("q", "q", "", true)
	old.GetPutQueue().CheckForwarding = false
	if r := applyAll(t, NewFSM(), addNode("n1"), old)[1]; r.GetErrorReason() != 0 {
		t.Fatalf("refused: %v %s", r.GetErrorReason(), r.GetErrorMessage())
	}
}
