package azsdk

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/procs"
)

// TestPartitionLeaderKilledLosesNoAcknowledgedMessage sends through the
// AMQP listener of one node of three to a partitioned queue, kills the
// node leading a partition halfway, and receives through the same node:
// every send the SDK saw acknowledged comes out.
func TestPartitionLeaderKilledLosesNoAcknowledgedMessage(t *testing.T) {
	c := procs.Start(t, bin, 3)
	ctx := testContext(t)
	adm, err := admin.New(c.Addrs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := adm.CreateQueue(ctx, "orders", &admin.QueueProperties{PartitionCount: to.Ptr(uint32(3))}); err != nil {
		t.Fatal(err)
	}
	routes, err := adm.GetRoutingTable(ctx, "orders")
	if err != nil || len(routes) != 1 || len(routes[0].GetPartitions()) != 3 {
		t.Fatalf("routing table %v, %v", routes, err)
	}
	victim := c.IndexOf(routes[0].GetPartitions()[0].GetLeaderAddress())
	if victim < 0 {
		t.Fatalf("no leader for partition 0 in %v", routes)
	}
	entry := (victim + 1) % len(c.Nodes)
	cs := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=x;SharedAccessKey=y;UseDevelopmentEmulator=true", c.Nodes[entry].AMQPAddr)
	sb, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	sender, err := sb.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(ctx)

	acked := map[string]bool{}
	const total = 40
	for i := 0; i < total; i++ {
		if i == total/2 {
			c.Kill(victim)
		}
		id := strconv.Itoa(i)
		err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: to.Ptr(id), Body: []byte(id)}, nil)
		if err != nil {
			// Not acknowledged: it may or may not be there.
			t.Logf("send %s: %v", id, err)
			continue
		}
		acked[id] = true
	}
	if len(acked) < total/2 {
		t.Fatalf("only %d of %d sends acknowledged", len(acked), total)
	}

	receiver, err := sb.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close(ctx)
	seen := map[string]bool{}
	for missing := len(acked); missing > 0; {
		msgs, err := receiver.ReceiveMessages(ctx, 50, nil)
		if err != nil {
			t.Fatalf("receive with %d acknowledged messages missing: %v", missing, err)
		}
		for _, m := range msgs {
			if acked[m.MessageID] && !seen[m.MessageID] {
				seen[m.MessageID] = true
				missing--
			}
			if err := receiver.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("complete %s: %v", m.MessageID, err)
			}
		}
	}
}
