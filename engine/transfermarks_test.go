package engine

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func acceptTransferCmd(stream string, from, to uint64) *enginev1.Command {
	c := &enginev1.AcceptTransfer{EntityPath: testQueue, Stream: stream}
	for n := from; n <= to; n++ {
		c.Messages = append(c.Messages, &enginev1.TransferredMessage{Number: n, Message: &raftbusv1.Message{MessageId: fmt.Sprintf("%s#%d", stream, n)}})
	}
	return &enginev1.Command{Body: &enginev1.Command_AcceptTransfer{AcceptTransfer: c}}
}

// TestTransferMarksStayBoundedOverManyTransfersAndSources forwards ten
// thousand messages from sources that come and go (each deleted and
// created again, a new incarnation and so a new stream, as auto delete on
// idle does): the target's marks never outnumber the live sources, its
// snapshot does not grow with the transfers it accepted, and a repeat of
// accepted transfers (a new source leader starting over) is recognised
// throughout.
func TestTransferMarksStayBoundedOverManyTransfersAndSources(t *testing.T) {
	h := newHarness(t, nil)
	const sources, batches, perBatch = 20, 50, 10
	for inc := 1; inc <= sources; inc++ {
		stream := fmt.Sprintf("src@%d/0", inc)
		var next uint64 = 1
		for b := 0; b < batches; b++ {
			h.ok(acceptTransferCmd(stream, next, next+perBatch-1))
			next += perBatch
			h.advance(2 * time.Second)
			if b%10 == 9 {
				// A new leader of the source sends again from an older
				// message: every accepted one is a duplicate.
				before := h.counts().GetActiveMessageCount()
				res := h.ok(acceptTransferCmd(stream, next-3*perBatch, next-1))
				for i, r := range res.GetAcceptTransfer().GetMessages() {
					if !r.GetDuplicate() {
						t.Fatalf("source %d, batch %d: repeated transfer %d was accepted again", inc, b, i)
					}
				}
				if after := h.counts().GetActiveMessageCount(); after != before {
					t.Fatalf("a repeat enqueued %d messages", after-before)
				}
			}
			if n := h.e.TransferMarkCount(); n > 2 {
				t.Fatalf("source %d, batch %d: %d marks for at most 2 live sources", inc, b, n)
			}
		}
		// The previous incarnation of the source was deleted: the
		// cluster has the target forget it once it is quiet.
		if inc > 1 {
			h.ok(&enginev1.Command{Body: &enginev1.Command_ForgetTransferStreams{ForgetTransferStreams: &enginev1.ForgetTransferStreams{
				EntityPath: testQueue, Streams: []string{fmt.Sprintf("src@%d/0", inc-1)}, UnusedForMs: time.Minute.Milliseconds(),
			}}})
		}
	}
	if got := h.counts().GetActiveMessageCount(); got != sources*batches*perBatch {
		t.Fatalf("%d messages accepted, want %d", got, sources*batches*perBatch)
	}
	if n := h.e.TransferMarkCount(); n != 1 {
		t.Fatalf("%d marks left, want the live source's", n)
	}
	checkInvariants(t, h.e)

	// Without the messages, what the snapshot keeps of the transfers is
	// the one mark: drain the queue and compare with an engine that never
	// accepted a transfer.
	h.ok(&enginev1.Command{Body: &enginev1.Command_Lock{Lock: &enginev1.Lock{EntityPath: testQueue, MaxMessages: 1 << 20,
		ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE, MaxBytes: 1 << 40}}})
	var with, without bytes.Buffer
	if err := h.e.Snapshot(&with); err != nil {
		t.Fatal(err)
	}
	fresh := newHarness(t, nil)
	if err := fresh.e.Snapshot(&without); err != nil {
		t.Fatal(err)
	}
	if extra := with.Len() - without.Len(); extra > 200 {
		t.Fatalf("after %d transfers from %d sources the snapshot keeps %d bytes more than an empty one's", sources*batches*perBatch, sources, extra)
	}
}
