package cluster

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestHostileRequestsAreRefusedCleanly calls every public RPC with
// requests made of random bytes and of random field values (names too
// long, malformed or with path tricks, negative and extreme numbers,
// unknown enum values, odd sizes). The node must answer each with a
// status that carries a reason (never a panic or an opaque error), must
// not hang (only long polls may run to the deadline), and must keep
// what it stores: a queue the requests cannot name keeps its messages,
// and the node serves sends and receives afterwards.
func TestHostileRequestsAreRefusedCleanly(t *testing.T) {
	c := newTestCluster(t, 1)
	cl := c.client(0)
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "kept", PartitionCount: proto.Uint32(2)})
	for i := range 3 {
		sendOne(t, cl, "kept", fmt.Sprintf("m%d", i))
	}
	conn := dialConn(t, c.nodes[0].Addr())

	var methods []protoreflect.MethodDescriptor
	for _, name := range []protoreflect.FullName{"raftbus.v1.MessagingService", "raftbus.v1.AdminService", "raftbus.v1.AccessService"} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
		if err != nil {
			t.Fatal(err)
		}
		ms := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range ms.Len() {
			methods = append(methods, ms.Get(i))
		}
	}
	longPolls := map[protoreflect.Name]bool{"Receive": true, "AcceptSession": true}
	rng := rand.New(rand.NewPCG(20261125, 1))
	const perMethod = 25
	for _, m := range methods {
		full := "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
		in, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
		if err != nil {
			t.Fatal(err)
		}
		out, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
		if err != nil {
			t.Fatal(err)
		}
		for k := range perMethod {
			req := in.New()
			if k%3 == 0 {
				// Random bytes: what decodes, decodes into something.
				b := make([]byte, rng.IntN(64))
				for i := range b {
					b[i] = byte(rng.UintN(256))
				}
				// (Bytes that do not decode at all are refused by gRPC
				// itself, before any raftbus code.)
				_ = proto.Unmarshal(b, req.Interface())
			} else {
				fill(rng, req, 0)
			}
			if longPolls[m.Name()] {
				// Bound the wait a long poll may ask for, so that the
				// deadline below tells a hang from a wait.
				if f := req.Descriptor().Fields().ByName("max_wait"); f != nil {
					req.Set(f, protoreflect.ValueOfMessage(durationpb.New(100*time.Millisecond).ProtoReflect()))
				}
			}
			if _, err := proto.Marshal(req.Interface()); err != nil {
				continue // not a request a client can send
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := conn.Invoke(ctx, full, req.Interface(), out.New().Interface())
			cancel()
			if err == nil {
				continue
			}
			st := status.Convert(err)
			switch {
			case st.Code() == codes.DeadlineExceeded:
				t.Fatalf("%s hung on %v", full, req)
			case st.Code() == codes.Unknown || st.Code() == codes.Internal || reasonOf(err) == raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED:
				t.Fatalf("%s answered an opaque error %v to %v", full, err, req)
			}
		}
	}

	// What the requests could not name is as it was.
	peeked := retry(t, 10*time.Second, func(ctx context.Context) (*raftbusv1.PeekResponse, error) {
		return cl.msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: "kept", MaxMessages: 10})
	})
	if n := len(peeked.GetMessages()); n != 3 {
		t.Fatalf("%d messages kept, want 3", n)
	}
	for _, pm := range peeked.GetMessages() {
		if id := pm.GetMessage().GetMessageId(); string(pm.GetMessage().GetBody()) != "body "+id {
			t.Fatalf("message %s has body %q", id, pm.GetMessage().GetBody())
		}
	}
	sendOne(t, cl, "kept", "after")
	if got := drain(t, cl, "kept", 4, 30*time.Second); got["after"] != 1 {
		t.Fatalf("after the hostile requests received %v", got)
	}
}

func dialConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(MaxMessageBytes)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// hostileStrings are the names and texts random requests carry: none is
// "kept".
var hostileStrings = []string{
	"", " ", "../kept", "kept/", "/kept", "kept/subscriptions/", "kept/subscriptions/x/rules/y", "a\x00b", "é",
	strings.Repeat("x", 261), strings.Repeat("y", 5000), "1=1 OR", "sys.Label = 'x' AND (", "$Default", "q?x", "\u202e",
}

// fill sets every field of m to random, often hostile, values, down to a
// few levels of nested messages.
func fill(rng *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if rng.IntN(4) == 0 || (f.ContainingOneof() != nil && rng.IntN(2) == 0) {
			continue
		}
		switch {
		case f.IsList():
			l := m.Mutable(f).List()
			for range rng.IntN(4) {
				if v, ok := value(rng, f, l.NewElement, depth); ok {
					l.Append(v)
				}
			}
		case f.IsMap():
			mp := m.Mutable(f).Map()
			for range rng.IntN(3) {
				k, _ := value(rng, f.MapKey(), nil, depth)
				if f.MapKey().Kind() == protoreflect.StringKind {
					k = protoreflect.ValueOfString(fmt.Sprint("k", rng.IntN(5)))
				}
				if v, ok := value(rng, f.MapValue(), mp.NewValue, depth); ok {
					mp.Set(k.MapKey(), v)
				}
			}
		default:
			if v, ok := value(rng, f, func() protoreflect.Value { return m.NewField(f) }, depth); ok {
				m.Set(f, v)
			}
		}
	}
}

func value(rng *rand.Rand, f protoreflect.FieldDescriptor, newMsg func() protoreflect.Value, depth int) (protoreflect.Value, bool) {
	ints := []int64{0, 1, -1, 2, 1000, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, rng.Int64()}
	switch f.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(hostileStrings[rng.IntN(len(hostileStrings))]), true
	case protoreflect.BytesKind:
		b := make([]byte, []int{0, 1, 15, 16, 17, 64, 300 << 10}[rng.IntN(7)])
		for i := range min(len(b), 64) {
			b[i] = byte(rng.UintN(256))
		}
		return protoreflect.ValueOfBytes(b), true
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rng.IntN(2) == 0), true
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(rng.IntN(8) - 1)), true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(ints[rng.IntN(len(ints))])), true
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(ints[rng.IntN(len(ints))]), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(ints[rng.IntN(len(ints))])), true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(ints[rng.IntN(len(ints))])), true
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{0, -1, math.NaN(), math.Inf(1), 1e308}[rng.IntN(5)]), true
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32([]float64{0, -1, math.NaN(), math.Inf(-1)}[rng.IntN(4)])), true
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if depth >= 4 || newMsg == nil {
			return protoreflect.Value{}, false
		}
		v := newMsg()
		fill(rng, v.Message(), depth+1)
		return v, true
	}
	return protoreflect.Value{}, false
}
