package metrics

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// publicAPI prefixes the methods of the public services (raftbus.v1):
// those alone are client requests worth a latency and an error count.
const publicAPI = "/raftbus.v1."

// UnaryInterceptor times every call of the public API a client made to
// this node and counts its errors by reason. fromNode says whether a call
// came from another node (forwarded, or on its own behalf): those are
// counted by the node the client called, so not here. It must run outside
// the interceptor that turns errors into statuses, so that it sees the
// reason the client gets.
func (m *Metrics) UnaryInterceptor(fromNode func(context.Context) bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !strings.HasPrefix(info.FullMethod, publicAPI) || fromNode(ctx) {
			return handler(ctx, req)
		}
		start := time.Now()
		resp, err := handler(ctx, req)
		method := info.FullMethod[strings.LastIndexByte(info.FullMethod, '/')+1:]
		m.requestSeconds.WithLabelValues(method).Observe(time.Since(start).Seconds())
		if err != nil {
			m.requestErrors.WithLabelValues(method, reasonOf(err)).Inc()
		}
		return resp, err
	}
}

// reasonOf is the error reason a client sees (ErrorInfo), without its
// enum prefix; the gRPC code for a status without one.
func reasonOf(err error) string {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*raftbusv1.ErrorInfo); ok {
			return strings.TrimPrefix(info.GetReason().String(), "ERROR_REASON_")
		}
	}
	return st.Code().String()
}
