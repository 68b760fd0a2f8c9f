package partition

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func sizedProposal(id string, bodyBytes int) *proposal {
	cmd := &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: "orders", Messages: []*raftbusv1.Message{
		{MessageId: id, Body: make([]byte, bodyBytes)},
	}}}}
	return &proposal{cmd: cmd, size: proto.Size(cmd) + commandFraming}
}

// entries drains the queue the way runProposer does and returns the
// encoded entries with the message ids each carries.
func entries(t *testing.T, p *Partition) (sizes []int, ids [][]string) {
	t.Helper()
	var pending []*proposal
	for {
		if len(pending) == 0 {
			select {
			case pending = <-p.proposals:
			default:
				return sizes, ids
			}
		}
		var batch []*proposal
		batch, pending = p.collect(pending)
		entry, err := stamp(batch, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(entry)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(b))
		var carried []string
		for _, c := range entry.GetCommands() {
			carried = append(carried, c.GetSend().GetMessages()[0].GetMessageId())
		}
		ids = append(ids, carried)
	}
}

func TestLargeCommandsAreSplitAcrossEntriesUnderTheCap(t *testing.T) {
	p := &Partition{cfg: Config{MaxCommandsPerEntry: DefaultMaxCommandsPerEntry}, proposals: make(chan []*proposal, 1024)}
	// Ten commands of 500 KB wait together, the first alone and the rest
	// as one call's: two fit in an entry, three would not.
	p.proposals <- []*proposal{sizedProposal("0", 500_000)}
	var group []*proposal
	for i := 1; i < 10; i++ {
		group = append(group, sizedProposal(fmt.Sprint(i), 500_000))
	}
	p.proposals <- group
	sizes, ids := entries(t, p)
	if len(sizes) != 5 {
		t.Fatalf("%d entries %v, want 5 of two commands", len(sizes), ids)
	}
	var order []string
	for i, s := range sizes {
		if s > MaxEntryBytes {
			t.Fatalf("entry %d is %d bytes, over MaxEntryBytes %d", i, s, MaxEntryBytes)
		}
		order = append(order, ids[i]...)
	}
	if fmt.Sprint(order) != "[0 1 2 3 4 5 6 7 8 9]" {
		t.Fatalf("commands proposed in order %v", order)
	}

	// Commands of the largest size each fit in an entry, two do not; small
	// ones fill what is left, up to MaxCommandsPerEntry.
	largest := func(id string) *proposal {
		pr := sizedProposal(id, 0)
		pr.cmd.GetSend().GetMessages()[0].Body = make([]byte, MaxCommandBytes-proto.Size(pr.cmd)-8)
		pr.size = proto.Size(pr.cmd) + commandFraming
		return pr
	}
	if n := proto.Size(largest("x").cmd); n > MaxCommandBytes || n < MaxCommandBytes-16 {
		t.Fatalf("test command of %d bytes, want about MaxCommandBytes", n)
	}
	p.proposals <- []*proposal{largest("a")}
	p.proposals <- []*proposal{largest("b")}
	group = nil
	for i := range 600 {
		group = append(group, sizedProposal(fmt.Sprint(i), 100))
	}
	p.proposals <- group
	sizes, ids = entries(t, p)
	if n := lengths(ids); len(n) < 3 || n[0] != 1 || ids[0][0] != "a" || n[1] < 2 || ids[1][0] != "b" {
		t.Fatalf("entries of %v commands: want the largest alone, the next with small ones", n)
	}
	var small []string
	for i, s := range sizes {
		if s > MaxEntryBytes || len(ids[i]) > DefaultMaxCommandsPerEntry {
			t.Fatalf("entry %d is %d bytes with %d commands, over MaxEntryBytes %d or MaxCommandsPerEntry", i, s, len(ids[i]), MaxEntryBytes)
		}
		if i > 0 {
			small = append(small, ids[i]...)
		}
	}
	if len(small) != 601 || small[1] != "0" || small[600] != "599" {
		t.Fatalf("%d commands after the largest, want b and 600 small ones in order", len(small))
	}
}

func lengths(ids [][]string) []int {
	var n []int
	for _, x := range ids {
		n = append(n, len(x))
	}
	return n
}

func TestStampCarriesTimeSeedAndEngineVersionWithinTheFraming(t *testing.T) {
	pr := sizedProposal("a", MaxCommandBytes-100)
	before := proto.Size(pr.cmd)
	ms := time.Now().UnixMilli()
	entry, err := stamp([]*proposal{pr}, ms)
	if err != nil {
		t.Fatal(err)
	}
	c := entry.GetCommands()[0]
	if c.GetNowUnixMs() != ms || len(c.GetTokenSeed()) != tokenSeedSize || c.GetEngineVersion() != engine.Version {
		t.Fatalf("stamped %d, seed %x, version %d", c.GetNowUnixMs(), c.GetTokenSeed(), c.GetEngineVersion())
	}
	after := proto.Size(c)
	framed := protowire.SizeTag(1) + protowire.SizeBytes(after)
	if added := framed - before; added > commandFraming {
		t.Fatalf("a stamped command adds %d bytes to its entry, commandFraming allows %d", added, commandFraming)
	}
}
