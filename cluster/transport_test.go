package cluster

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
)

// A grant of a ReceiveStream goes through the node's unary interceptors
// as the server chains them: outermost first, the handler last, each
// seeing what the one before passed on.
func TestChainUnaryRunsInterceptorsAsTheServerDoes(t *testing.T) {
	var order []string
	mark := func(name string) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			order = append(order, name+" "+info.FullMethod)
			return handler(ctx, req.(string)+name)
		}
	}
	chain := chainUnary([]grpc.UnaryServerInterceptor{mark("a"), mark("b"), mark("c")})
	resp, err := chain(context.Background(), "req:", &grpc.UnaryServerInfo{FullMethod: "/m"}, func(_ context.Context, req any) (any, error) {
		order = append(order, "handler")
		return req, nil
	})
	if err != nil || resp != "req:abc" || fmt.Sprint(order) != "[a /m b /m c /m handler]" {
		t.Fatalf("chain answered %v, %v after %v; want req:abc after a, b, c, handler", resp, err, order)
	}
}
