package amqp

import (
	"net"
	"testing"
	"time"
)

// rawPeer is a client that writes performatives as they are and reads
// the server's back one frame at a time: for what the SDKs send that no
// Go client library does (uamqp's and .NET's frames, transactions).
type rawPeer struct {
	t    *testing.T
	conn net.Conn
	fr   *frameReader
}

// dialRaw opens an AMQP connection (no SASL) and one session on channel 0.
func dialRaw(t *testing.T, addr string) *rawPeer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	p := &rawPeer{t: t, conn: conn, fr: newFrameReader(conn)}
	p.fr.Max = 1 << 20
	if _, err := conn.Write(headerAMQP[:]); err != nil {
		t.Fatal(err)
	}
	if h, err := p.fr.readProtocolHeader(); err != nil || h != headerAMQP {
		t.Fatalf("protocol header %v, %v", h, err)
	}
	p.send(&open{ContainerID: "raw", MaxFrameSize: 1 << 20, ChannelMax: 1})
	p.expect("open")
	p.send(&begin{NextOutgoingID: 0, IncomingWindow: 1000, OutgoingWindow: 1000, HandleMax: 16})
	p.expect("begin")
	return p
}

// rawPerf is a performative given as its described list.
type rawPerf struct{ v any }

func (r rawPerf) described() any { return r.v }

func (p *rawPeer) send(perf performative) { p.sendPayload(perf, nil) }

func (p *rawPeer) sendPayload(perf performative, payload []byte) {
	p.t.Helper()
	b, err := encodeFrame(frameTypeAMQP, 0, perf, payload)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.conn.Write(b); err != nil {
		p.t.Fatal(err)
	}
}

// next reads the next performative (heartbeats skipped) and its payload.
func (p *rawPeer) next() (any, []byte) {
	p.t.Helper()
	for {
		f, err := p.fr.read()
		if err != nil {
			p.t.Fatalf("read: %v", err)
		}
		if len(f.Body) == 0 {
			continue
		}
		v, n, err := Unmarshal(f.Body)
		if err != nil {
			p.t.Fatal(err)
		}
		perf, err := decodePerformative(f.Body)
		if err != nil {
			p.t.Fatalf("%v: %v", v, err)
		}
		return perf, f.Body[n:]
	}
}

// expect reads the next performative and fails unless it is of kind.
func (p *rawPeer) expect(kind string) any {
	p.t.Helper()
	perf, _ := p.next()
	if got := kindOf(perf); got != kind {
		p.t.Fatalf("got %s %+v, want %s", got, perf, kind)
	}
	return perf
}

func kindOf(perf any) string {
	switch perf.(type) {
	case *open:
		return "open"
	case *begin:
		return "begin"
	case *attach:
		return "attach"
	case *flow:
		return "flow"
	case *transfer:
		return "transfer"
	case *disposition:
		return "disposition"
	case *detach:
		return "detach"
	}
	return "other"
}

// TestACoordinatorLinkIsRefusedAsNotImplemented: .NET and Java attach a
// sender to a coordinator target to declare a transaction. The attach is
// answered without a target and detached with amqp:not-implemented, and
// the connection goes on.
func TestACoordinatorLinkIsRefusedAsNotImplemented(t *testing.T) {
	h := &queueHandler{msgs: make(chan []byte, 10)}
	p := dialRaw(t, startServer(t, h))
	coordinator := Described{Descriptor: uint64(0x30), Value: []any{Array{Symbol("amqp:local-transactions")}}}
	p.send(rawPerf{describedList(codeAttach, "txn", uint32(0), roleSender, SenderSettleMixed, ReceiverSettleFirst,
		(&Source{Address: "client"}).described(), coordinator, nil, nil, uint32(0))})
	reply := p.expect("attach").(*attach)
	if reply.Target != nil {
		t.Fatalf("the refused attach's reply has target %+v", reply.Target)
	}
	d := p.expect("detach").(*detach)
	if d.Error == nil || d.Error.Condition != ErrCondNotImplemented {
		t.Fatalf("detached with %+v, want %s", d.Error, ErrCondNotImplemented)
	}
	// The session and connection are fine: a link to the queue attaches.
	p.send(&attach{Name: "s", Handle: 1, Role: roleSender, Target: &Target{Address: "q"}, Source: &Source{Address: "client"}})
	if a := p.expect("attach").(*attach); a.Target == nil || a.Target.Address != "q" {
		t.Fatalf("the next attach was answered with %+v", a)
	}
}

// answerHandler answers each message on link "requests" with one on the
// link "replies", after the request's disposition (AfterSettle), as
// the Service Bus request/response nodes must for uamqp.
type answerHandler struct{ replies chan *Link }

func (h *answerHandler) Connect(*Conn) ConnHandler { return h }
func (h *answerHandler) Closed()                   {}
func (h *answerHandler) Attach(l *Link) error {
	if !l.Incoming {
		h.replies <- l
		return nil
	}
	l.OnMessage = func(d *Delivery) DeliveryState {
		reply := <-h.replies
		h.replies <- reply
		d.AfterSettle(func() {
			reply.Send(reply.Context(), &OutgoingDelivery{Tag: []byte("r"), Payload: d.Payload, Settled: true})
		})
		return &Accepted{}
	}
	return nil
}

// TestAnAnswerFollowsTheRequestsDisposition: the disposition settling a
// request goes out before the answer the handler sends from AfterSettle.
func TestAnAnswerFollowsTheRequestsDisposition(t *testing.T) {
	p := dialRaw(t, startServer(t, &answerHandler{replies: make(chan *Link, 1)}))
	// The receiver of answers, with credit.
	p.send(&attach{Name: "replies", Handle: 0, Role: roleReceiver, Source: &Source{Address: "$cbs"}, Target: &Target{Address: "client"}})
	p.expect("attach")
	handle, credit, count := uint32(0), uint32(10), uint32(0)
	next := uint32(0)
	p.send(&flow{NextIncomingID: &next, IncomingWindow: 1000, NextOutgoingID: 0, OutgoingWindow: 1000, Handle: &handle, DeliveryCount: &count, LinkCredit: &credit})
	// The sender of requests.
	p.send(&attach{Name: "requests", Handle: 1, Role: roleSender, Source: &Source{Address: "client"}, Target: &Target{Address: "$cbs"}})
	p.expect("attach")
	p.expect("flow") // the server's credit
	id, format := uint32(0), uint32(0)
	p.sendPayload(&transfer{Handle: 1, DeliveryID: &id, DeliveryTag: []byte("q"), MessageFormat: &format}, []byte{0x00, 0x53, 0x77, 0xa1, 0x01, 'x'})
	var order []string
	for len(order) < 2 {
		perf, _ := p.next()
		switch k := kindOf(perf); k {
		case "disposition", "transfer":
			order = append(order, k)
		}
	}
	if order[0] != "disposition" || order[1] != "transfer" {
		t.Fatalf("the server sent %v, want the disposition before the answer", order)
	}
}

// TestARangeDispositionSettlesEachDelivery: a peer may settle several
// deliveries with one disposition, first..last (uamqp and .NET's AMQP
// library batch them). Each delivery in the range gets its outcome.
func TestARangeDispositionSettlesEachDelivery(t *testing.T) {
	h := &queueHandler{msgs: make(chan []byte, 10), settled: make(chan struct{}, 3)}
	p := dialRaw(t, startServer(t, h))
	for _, b := range []string{"a", "b", "c"} {
		h.msgs <- []byte{0x00, 0x53, 0x75, 0xa0, 0x01, b[0]}
	}
	p.send(&attach{Name: "r", Handle: 0, Role: roleReceiver, SndSettleMode: SenderSettleUnsettled, RcvSettleMode: ReceiverSettleFirst,
		Source: &Source{Address: "q"}, Target: &Target{Address: "client"}})
	p.expect("attach")
	handle, credit, count, next := uint32(0), uint32(10), uint32(0), uint32(0)
	p.send(&flow{NextIncomingID: &next, IncomingWindow: 1000, NextOutgoingID: 0, OutgoingWindow: 1000, Handle: &handle, DeliveryCount: &count, LinkCredit: &credit})
	var ids []uint32
	for len(ids) < 3 {
		if tr, ok := p.expectAny().(*transfer); ok {
			ids = append(ids, *tr.DeliveryID)
		}
	}
	last := ids[2]
	p.send(&disposition{Role: roleReceiver, First: ids[0], Last: &last, Settled: true, State: (&Accepted{}).outcome()})
	timeout := time.After(5 * time.Second)
	for n := 0; n < 3; n++ {
		select {
		case <-h.settled:
		case <-timeout:
			t.Fatalf("%d of 3 deliveries settled by the range %d..%d", n, ids[0], last)
		}
	}
}

// expectAny reads the next performative, whatever it is.
func (p *rawPeer) expectAny() any {
	p.t.Helper()
	perf, _ := p.next()
	return perf
}
