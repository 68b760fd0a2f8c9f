// Package proxy is a TCP proxy for tests that loses the answer to a gRPC
// call: it passes a connection's bytes both ways, and once armed it cuts
// the connection that carries the next response, after the server handled
// the request and before the client reads the answer. That is the fault
// whose outcome a client cannot know: the request took effect, the
// connection broke ("error reading from server: EOF"). The answers to the
// clock pings nodes send each other in the background (NodeService.Ping)
// are never the one cut: a test arms the proxy for the call it makes.
package proxy

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// Proxy forwards the connections made to Addr to a target address.
type Proxy struct {
	// Addr is where the proxy listens (127.0.0.1).
	Addr   string
	target string
	lis    net.Listener
	armed  atomic.Int32
	cuts   atomic.Int32

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// Start starts a proxy to target, stopped when the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: lis.Addr().String(), target: target, lis: lis, conns: make(map[net.Conn]bool)}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// DropResponses arms the proxy: the next n responses (gRPC response
// headers, on any connection) are not delivered; the connection carrying
// each is closed at once instead.
func (p *Proxy) DropResponses(n int) { p.armed.Store(int32(n)) }

// Dropped is how many responses the proxy has dropped.
func (p *Proxy) Dropped() int { return int(p.cuts.Load()) }

// Dialer dials the proxy whatever address is asked for, for
// grpc.WithContextDialer: a client connection made with it reaches the
// target through the proxy.
func (p *Proxy) Dialer() func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", p.Addr)
	}
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.lis.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Add(2)
		var pings sync.Map // stream ids of the connection's pings
		go func() {
			defer p.wg.Done()
			copyRequests(server, client, &pings)
			server.Close()
			client.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.copyResponses(client, server, &pings)
			server.Close()
			client.Close()
		}()
	}
}

func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}

const headersFrame = 0x1

// readFrame reads one HTTP/2 frame: its 9-byte header, and its payload.
func readFrame(r io.Reader, header *[9]byte) (frameType byte, stream uint32, payload []byte, err error) {
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return 0, 0, nil, err
	}
	length := int(header[0])<<16 | int(header[1])<<8 | int(header[2])
	payload = make([]byte, length)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, 0, nil, err
	}
	return header[3], binary.BigEndian.Uint32(header[5:]) & 0x7fffffff, payload, nil
}

// copyRequests copies the client's bytes to the server, noting in pings
// the streams that call NodeService.Ping. It reads the request headers
// with the connection's HPACK decoder, which must see every header block
// in order.
func copyRequests(server, client net.Conn, pings *sync.Map) {
	preface := make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	if _, err := io.ReadFull(client, preface); err != nil {
		return
	}
	if _, err := server.Write(preface); err != nil {
		return
	}
	var path string
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":path" {
			path = f.Value
		}
	})
	var header [9]byte
	for {
		frameType, stream, payload, err := readFrame(client, &header)
		if err != nil {
			return
		}
		if frameType == headersFrame {
			// gRPC sends each header block in one frame, unpadded and
			// without priority (flags 0x8 and 0x20 unset).
			path = ""
			if header[4]&0x28 == 0 {
				dec.Write(payload)
			}
			if strings.HasSuffix(path, "/Ping") {
				pings.Store(stream, true)
			}
		}
		if _, err := server.Write(append(header[:], payload...)); err != nil {
			return
		}
	}
}

// copyResponses copies the server's HTTP/2 frames to the client, one at a
// time, until the proxy is armed and a HEADERS frame on a stream (the
// start of a response) other than a ping's comes: then it returns without
// forwarding it.
func (p *Proxy) copyResponses(client, server net.Conn, pings *sync.Map) {
	var header [9]byte
	for {
		frameType, stream, payload, err := readFrame(server, &header)
		if err != nil {
			return
		}
		_, ping := pings.Load(stream)
		if frameType == headersFrame && stream != 0 && !ping && p.disarm() {
			p.cuts.Add(1)
			return
		}
		if _, err := client.Write(append(header[:], payload...)); err != nil {
			return
		}
	}
}

func (p *Proxy) disarm() bool {
	for {
		n := p.armed.Load()
		if n <= 0 {
			return false
		}
		if p.armed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.lis.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
