package test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// TestASingleNodeWorksAndStopsWithoutWarnings runs what a newcomer does
// first: one node, a few queues created, a message sent and received, then
// SIGTERM (as Ctrl-C). Nothing in that is out of the ordinary, so the log
// must hold no warning or error: not raft's "starting election" of every
// new group, and not a shutdown that waited for its groups to be handed
// over to peers a single node does not have.
func TestASingleNodeWorksAndStopsWithoutWarnings(t *testing.T) {
	c := procs.Start(t, raftbusd, 1)
	admin := raftbusv1.NewAdminServiceClient(c.Conn(0))
	msg := raftbusv1.NewMessagingServiceClient(c.Conn(0))
	for _, q := range []string{"first", "second", "third"} {
		createQueue(t, admin, 30*time.Second, &raftbusv1.QueueProperties{Name: q})
	}
	call(t, 30*time.Second, func(ctx context.Context) error {
		_, err := msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "second", Messages: []*raftbusv1.Message{{Body: []byte("hello")}}})
		return err
	})
	var got *raftbusv1.ReceiveResponse
	call(t, 30*time.Second, func(ctx context.Context) (err error) {
		got, err = msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "second", ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE, MaxWait: durationpb.New(5 * time.Second)})
		return err
	})
	if len(got.GetMessages()) != 1 || string(got.GetMessages()[0].GetMessage().GetBody()) != "hello" {
		t.Fatalf("received %v, want the one message sent", got.GetMessages())
	}

	// The bound is far above what a stop takes; the log below tells
	// whether the node waited for a hand-over it could never make.
	if err := c.Terminate(0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(c.Nodes[0].LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte("shutting down: no group left to hand over")) {
		t.Errorf("the node did not find at once that it had nothing to hand over; its log:\n%s", log)
	}
	for line := range bytes.Lines(log) {
		if bytes.Contains(line, []byte("level=WARN")) || bytes.Contains(line, []byte("level=ERROR")) {
			t.Errorf("logged %s", bytes.TrimSpace(line))
		}
	}
}
