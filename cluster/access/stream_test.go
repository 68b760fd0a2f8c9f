package access

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/internal/sas"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// onePolicy is the Policies of a namespace with one policy.
type onePolicy struct{ p *raftbusv1.AccessPolicy }

func (o onePolicy) AccessPolicy(entityPath, name string) (*raftbusv1.AccessPolicy, error) {
	if entityPath == o.p.GetEntityPath() && name == o.p.GetName() {
		return o.p, nil
	}
	return nil, nil
}

// fakeStream is a server stream that delivers reqs, then io.EOF.
type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	reqs []*raftbusv1.ReceiveStreamRequest
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func (f *fakeStream) RecvMsg(m any) error {
	if len(f.reqs) == 0 {
		return io.EOF
	}
	proto.Merge(m.(proto.Message), f.reqs[0])
	f.reqs = f.reqs[1:]
	return nil
}

// TestReceiveStreamNeedsListenOnItsEntity opens a ReceiveStream with a
// token of a policy without Listen (refused with UNAUTHORIZED before the
// handler sees the open request), of a policy with Listen on the entity
// (served), and of that policy on another entity (refused).
func TestReceiveStreamNeedsListenOnItsEntity(t *testing.T) {
	const key = "k"
	open := func(path string) []*raftbusv1.ReceiveStreamRequest {
		return []*raftbusv1.ReceiveStreamRequest{
			{Request: &raftbusv1.ReceiveStreamRequest_Open{Open: &raftbusv1.ReceiveStreamOpen{EntityPath: path}}},
			{Request: &raftbusv1.ReceiveStreamRequest_Credit{Credit: &raftbusv1.ReceiveCredit{ReceiveId: []byte("id")}}},
		}
	}
	token := sas.Sign("sb://ns/", "p", key, time.Now().Add(time.Hour))
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(sas.MetadataKey, token))
	info := &grpc.StreamServerInfo{FullMethod: raftbusv1.MessagingService_ReceiveStream_FullMethodName, IsClientStream: true, IsServerStream: true}
	// serve reads every request, as the handler does, and reports how
	// many it saw.
	serve := func(g *Guard, path string) (int, error) {
		seen := 0
		err := g.Stream(nil, &fakeStream{ctx: ctx, reqs: open(path)}, info, func(_ any, ss grpc.ServerStream) error {
			for {
				var req raftbusv1.ReceiveStreamRequest
				if err := ss.RecvMsg(&req); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				seen++
			}
		})
		return seen, err
	}
	guard := func(rights ...raftbusv1.AccessRight) *Guard {
		p := &raftbusv1.AccessPolicy{Name: "p", EntityPath: "orders", PrimaryKey: key, Rights: rights}
		return NewGuard(slog.New(slog.DiscardHandler), onePolicy{p}, time.Now)
	}

	seen, err := serve(guard(raftbusv1.AccessRight_ACCESS_RIGHT_SEND), "orders")
	if info := apierror.Info(err); info.GetReason() != raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED || !strings.Contains(info.GetMessage(), "does not grant listen") || seen != 0 {
		t.Fatalf("a Send-only token: %d requests handled, %v; want none and UNAUTHORIZED (does not grant listen)", seen, err)
	}
	seen, err = serve(guard(raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN), "other")
	if info := apierror.Info(err); info.GetReason() != raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED || seen != 0 {
		t.Fatalf("a Listen token of another entity: %d requests handled, %v; want none and UNAUTHORIZED", seen, err)
	}
	if seen, err = serve(guard(raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN), "orders"); err != nil || seen != 2 {
		t.Fatalf("a Listen token of the entity: %d requests handled, %v; want 2 and no error", seen, err)
	}
}
