package service

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A node puts messages free to go anywhere on one partition it leads until
// that one has taken placeEvery, then on the next it leads, in turn; it
// moves on at once from a partition it no longer leads, and places nothing
// when it leads none.
func TestFreeMessagesFillOnePartitionLedHereAtATime(t *testing.T) {
	e := newFakeNode("orders", 8).entity
	led := map[uint32]bool{2: true, 5: true, 7: true}
	var p placements
	place := func(n int, want uint32, why string) {
		t.Helper()
		id, ok := p.place(e, n, func(id uint32) bool { return led[id] })
		if !ok || id != want {
			t.Fatalf("placed on %d (%v); want %d: %s", id, ok, want, why)
		}
	}
	place(1, 2, "the first partition led here")
	place(placeEvery-2, 2, "2 has taken fewer than placeEvery")
	place(1, 2, "2 has taken fewer than placeEvery")
	place(1, 5, "2 has taken placeEvery: the next led here")
	place(placeEvery, 5, "5 had taken one")
	place(1, 7, "the next led here")
	place(placeEvery, 7, "7 had taken one")
	place(1, 2, "the first again, in turn")
	led[2], led[5] = false, false
	place(1, 7, "2 is no longer led here, nor 5")
	led[7] = false
	if id, ok := p.place(e, 1, func(id uint32) bool { return led[id] }); ok {
		t.Fatalf("placed on %d while leading nothing", id)
	}
}

// A SendEach puts its messages free to go anywhere on one partition led
// here, whatever partitions their sender named, and leaves alone those
// with a key, those not marked free and (on an entity that detects
// duplicates) those with a MessageId; a Send marked free goes there too.
func TestMessagesFreeToGoAnywhereShareThePartitionOfTheMoment(t *testing.T) {
	node := newFakeNode("orders", 4)
	node.lead(1, 3)
	for id, r := range node.replicas {
		r.result = func(cmd *enginev1.Command) (*enginev1.Result, error) {
			n := len(cmd.GetSend().GetMessages())
			res := &enginev1.SendResult{}
			for range n {
				res.Messages = append(res.Messages, &raftbusv1.SendResult{PartitionId: id})
			}
			return &enginev1.Result{Result: &enginev1.Result_Send{Send: res}}, nil
		}
	}
	_, msg := serve(t, node)
	var key string // a partition key of partition 3
	for i := 0; raftbusv1.PartitionForKey(key, 4) != 3; i++ {
		key = string(rune('a' + i))
	}
	free := func(id uint32) *raftbusv1.PartitionedMessage {
		return &raftbusv1.PartitionedMessage{Message: &raftbusv1.Message{Body: []byte("x")}, PartitionId: id, AnyPartition: true}
	}
	req := &raftbusv1.SendEachRequest{EntityPath: "orders", Messages: []*raftbusv1.PartitionedMessage{
		free(3), free(1), free(3),
		{Message: &raftbusv1.Message{Body: []byte("keyed"), PartitionKey: key}, PartitionId: 3, AnyPartition: true},
		{Message: &raftbusv1.Message{Body: []byte("named")}, PartitionId: 3},
	}}
	resp, err := msg.SendEach(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint32
	for _, r := range resp.GetResults() {
		got = append(got, r.GetResult().GetPartitionId())
	}
	if want := []uint32{1, 1, 1, 3, 3}; !slices.Equal(got, want) {
		t.Fatalf("messages went to partitions %v; want %v (the free ones together on 1, the first led here)", got, want)
	}

	one := uint32(3)
	sent, err := msg.Send(context.Background(), &raftbusv1.SendRequest{EntityPath: "orders", PartitionId: &one, AnyPartition: true,
		Messages: []*raftbusv1.Message{{Body: []byte("a")}, {Body: []byte("b")}}})
	if err != nil || len(sent.GetResults()) != 2 || sent.GetResults()[0].GetPartitionId() != 1 {
		t.Fatalf("send of a batch free to go anywhere: %v, %v; want it on partition 1", sent, err)
	}

	// Duplicate detection is kept per partition: a message with a
	// MessageId stays where its sender named.
	node.entity.Queue.RequiresDuplicateDetection = proto.Bool(true)
	resp, err = msg.SendEach(context.Background(), &raftbusv1.SendEachRequest{EntityPath: "orders", Messages: []*raftbusv1.PartitionedMessage{
		{Message: &raftbusv1.Message{MessageId: "m", Body: []byte("x")}, PartitionId: 3, AnyPartition: true},
	}})
	if err != nil || resp.GetResults()[0].GetResult().GetPartitionId() != 3 {
		t.Fatalf("send with a MessageId to an entity detecting duplicates: %v, %v; want partition 3", resp, err)
	}
}
