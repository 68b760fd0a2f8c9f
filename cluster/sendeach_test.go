package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/service"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestSendEachGivesEachMessageItsOwnOutcome sends, in one request to the
// node that leads the fewest partitions, messages for every partition of a
// queue next to messages that must fail on their own, and checks each
// outcome and what the queue holds afterwards.
func TestSendEachGivesEachMessageItsOwnOutcome(t *testing.T) {
	c := newTestCluster(t, 3)
	const parts = 4
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "jobs", PartitionCount: proto.Uint32(parts), MaxMessageSizeInKilobytes: proto.Int64(64)})
	key := "order-7"
	keyPart := raftbusv1.PartitionForKey(key, parts)

	var msgs []*raftbusv1.PartitionedMessage
	var want []raftbusv1.ErrorReason
	ok := func(id uint32, m *raftbusv1.Message) {
		msgs = append(msgs, &raftbusv1.PartitionedMessage{Message: m, PartitionId: id})
		want = append(want, 0)
	}
	bad := func(id uint32, m *raftbusv1.Message, reason raftbusv1.ErrorReason) {
		msgs = append(msgs, &raftbusv1.PartitionedMessage{Message: m, PartitionId: id})
		want = append(want, reason)
	}
	for i := range 2 * parts {
		ok(uint32(i%parts), &raftbusv1.Message{MessageId: fmt.Sprintf("m%d", i), Body: []byte("body")})
	}
	ok(keyPart, &raftbusv1.Message{MessageId: "keyed", PartitionKey: key})
	bad(keyPart+1, &raftbusv1.Message{MessageId: "misplaced", PartitionKey: key}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	bad(0, &raftbusv1.Message{MessageId: "large", Body: make([]byte, 65*1024)}, raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED)
	bad(1, nil, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	ok(1, &raftbusv1.Message{MessageId: "last"})

	counts, via := c.leaderCounts("jobs", parts), 0
	for i := range c.nodes {
		if counts[i] < counts[via] {
			via = i
		}
	}
	resp := retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.SendEachResponse, error) {
		return c.client(via).msg.SendEach(ctx, &raftbusv1.SendEachRequest{EntityPath: "jobs", Messages: msgs})
	})
	if len(resp.GetResults()) != len(msgs) {
		t.Fatalf("%d results for %d messages", len(resp.GetResults()), len(msgs))
	}
	sent := map[string]int64{}
	for i, r := range resp.GetResults() {
		if got := r.GetError().GetReason(); got != want[i] || (want[i] != 0) != (r.GetError() != nil) {
			t.Errorf("message %d: got %v (%s), want %v", i, got, r.GetError().GetMessage(), want[i])
			continue
		}
		if want[i] != 0 {
			continue
		}
		seq := r.GetResult().GetSequenceNumber()
		if p := raftbusv1.PartitionOfSequence(seq); p != msgs[i].GetPartitionId() {
			t.Errorf("message %d went to partition %d, not %d", i, p, msgs[i].GetPartitionId())
		}
		sent[msgs[i].GetMessage().GetMessageId()] = seq
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	peek, err := c.client(0).msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: "jobs", MaxMessages: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(peek.GetMessages()) != len(sent) {
		t.Errorf("the queue holds %d messages, want the %d accepted", len(peek.GetMessages()), len(sent))
	}
	for _, m := range peek.GetMessages() {
		if seq, found := sent[m.GetMessage().GetMessageId()]; !found || seq != m.GetSequenceNumber() {
			t.Errorf("the queue holds %s #%d, which was not accepted as such", m.GetMessage().GetMessageId(), m.GetSequenceNumber())
		}
	}

	// A request with nothing or too much in it is refused as a whole.
	for _, n := range []int{0, service.MaxBatch + 1} {
		_, err := c.client(0).msg.SendEach(ctx, &raftbusv1.SendEachRequest{EntityPath: "jobs", Messages: make([]*raftbusv1.PartitionedMessage, n)})
		if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Errorf("send of %d: %v, want INVALID_ARGUMENT", n, err)
		}
	}
	_, err = c.client(0).msg.SendEach(ctx, &raftbusv1.SendEachRequest{EntityPath: "nosuchqueue", Messages: msgs[:1]})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
		t.Errorf("send to an unknown queue: %v, want NOT_FOUND", err)
	}
}
