package amqp

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// preamble opens a connection, a session and a link in each direction,
// as a client would; the fuzzer's bytes follow it.
func preamble(t testing.TB) []byte {
	var b bytes.Buffer
	b.Write(headerAMQP[:])
	for _, p := range []performative{
		&open{ContainerID: "fuzz", MaxFrameSize: 65536},
		&begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100},
		&attach{Name: "in", Handle: 0, Role: roleSender, Target: &Target{Address: "q"}},
		&attach{Name: "out", Handle: 1, Role: roleReceiver, Source: &Source{Address: "q"}},
	} {
		f, err := encodeFrame(frameTypeAMQP, 0, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(f)
	}
	return b.Bytes()
}

func frames(t testing.TB, ps ...performative) []byte {
	var b bytes.Buffer
	for _, p := range ps {
		f, err := encodeFrame(frameTypeAMQP, 0, p, []byte("payload"))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(f)
	}
	return b.Bytes()
}

// FuzzConnection feeds arbitrary frames to an open connection: whatever
// they are, the connection ends or goes on, and the server neither
// panics nor hangs.
func FuzzConnection(f *testing.F) {
	id, last, credit := uint32(0), uint32(3), uint32(10)
	h0, h1 := uint32(0), uint32(1)
	f.Add(frames(f, &transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}}))
	f.Add(frames(f, &transfer{Handle: 0, DeliveryID: &id, More: true}, &transfer{Handle: 0, Aborted: true}))
	f.Add(frames(f, &flow{Handle: &h1, LinkCredit: &credit, Drain: true}, &flow{Handle: &h0, Echo: true}))
	f.Add(frames(f, &disposition{Role: roleReceiver, First: 0, Last: &last, Settled: true, State: (&Accepted{}).outcome()}))
	f.Add(frames(f, &detach{Handle: 1, Closed: true}, &detach{Handle: 7}, &end{}, &closePerf{}))
	f.Add(frames(f, &attach{Name: "again", Handle: 0}, &begin{}, &open{}))
	f.Fuzz(func(t *testing.T, data []byte) {
		srv := &Server{Handler: &queueHandler{msgs: make(chan []byte, 1000)}}
		srv.defaults()
		client, server := net.Pipe()
		c := newConn(srv, server)
		done := make(chan struct{})
		go func() {
			c.serve()
			close(done)
		}()
		go io.Copy(io.Discard, client) // whatever the server answers
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(preamble(t))
		client.Write(data)
		client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the connection did not end after its peer hung up")
		}
	})
}
