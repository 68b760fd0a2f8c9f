package access

import (
	"context"
	"testing"

	"google.golang.org/grpc/stats"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestCallsPerConnectionAreBounded(t *testing.T) {
	l := NewConnLimit(2)
	conn := l.TagConn(context.Background(), &stats.ConnTagInfo{})
	other := l.TagConn(context.Background(), &stats.ConnTagInfo{})
	const send = "/raftbus.v1.MessagingService/Send"
	exit1, err1 := l.enter(conn, send)
	_, err2 := l.enter(conn, send)
	if err1 != nil || err2 != nil {
		t.Fatalf("two calls refused: %v, %v", err1, err2)
	}
	_, err := l.enter(conn, send)
	if info := apierror.Info(err); info.GetReason() != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY || !info.GetRetryable() {
		t.Fatalf("third call: %v, want a retryable SERVER_BUSY", err)
	}
	if _, err := l.enter(other, send); err != nil {
		t.Fatalf("another connection refused: %v", err)
	}
	if _, err := l.enter(conn, "/raftbus.raft.v1.RaftTransportService/Heartbeats"); err != nil {
		t.Fatalf("peer traffic refused: %v", err)
	}
	exit1()
	if _, err := l.enter(conn, send); err != nil {
		t.Fatalf("a call after one ended refused: %v", err)
	}
}
