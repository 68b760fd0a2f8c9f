package service

import (
	"context"
	"sync"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/routing"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// SendEach sends messages that succeed or fail one by one. The messages
// of a partition go to its leader together (one forwarded request when it
// is elsewhere), each as a Send command of its own, all proposed at once:
// they share log entries, and one refused (too large, over the quota)
// takes no other down with it.
func (s *Messaging) SendEach(ctx context.Context, req *raftbusv1.SendEachRequest) (*raftbusv1.SendEachResponse, error) {
	all := req.GetMessages()
	if n := len(all); n == 0 || n > MaxBatch {
		return nil, apierror.Invalid("a send carries 1 to %d messages, not %d", MaxBatch, n)
	}
	e, err := s.sendable(ctx, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	results := make([]*raftbusv1.SendEachResult, len(all))
	failed := func(i int, err error) { results[i] = &raftbusv1.SendEachResult{Error: apierror.Info(err)} }

	// The messages of each partition, in request order.
	type batch struct {
		id    uint32
		items []int
		msgs  []*raftbusv1.Message
	}
	ids := make([]uint32, len(all))
	var free []int // the messages free to go anywhere
	for i, pm := range all {
		m := pm.GetMessage()
		if m == nil {
			failed(i, apierror.Invalid("message %d is empty", i))
			continue
		}
		requested := pm.GetPartitionId()
		id, err := s.sendPartition(e, []*raftbusv1.Message{m}, &requested)
		if err != nil {
			failed(i, err)
			continue
		}
		ids[i] = id
		if pm.GetAnyPartition() && anywhere(e, m) {
			free = append(free, i)
		}
	}
	// The messages free to go anywhere go together to the node's
	// partition of the moment (see placements).
	if id, ok := s.place(e, len(free)); ok {
		for _, i := range free {
			ids[i] = id
		}
	}

	var order []*batch
	batches := map[uint32]*batch{}
	for i, pm := range all {
		if results[i] != nil {
			continue
		}
		m, id := pm.GetMessage(), ids[i]
		b := batches[id]
		if b == nil {
			b = &batch{id: id}
			batches[id] = b
			order = append(order, b)
		}
		b.items = append(b.items, i)
		b.msgs = append(b.msgs, m)
	}

	var wg sync.WaitGroup
	for _, b := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := route(ctx, s.node, e, b.id, sendRepeat(e, b.msgs), func(r Replica) ([]*raftbusv1.SendEachResult, error) {
				cmds := make([]*enginev1.Command, len(b.msgs))
				for k, m := range b.msgs {
					cmds[k] = &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: e.GetName(), Messages: []*raftbusv1.Message{m}}}}
				}
				out := make([]*raftbusv1.SendEachResult, len(cmds))
				for k, a := range r.ApplyAll(ctx, cmds) {
					if a.Err != nil {
						out[k] = &raftbusv1.SendEachResult{Error: apierror.Info(a.Err)}
						continue
					}
					out[k] = &raftbusv1.SendEachResult{Result: a.Result.GetSend().GetMessages()[0]}
				}
				return out, nil
			}, func(ctx context.Context, conn grpc.ClientConnInterface) ([]*raftbusv1.SendEachResult, error) {
				fwd := &raftbusv1.SendEachRequest{EntityPath: e.GetName(), Messages: make([]*raftbusv1.PartitionedMessage, len(b.items))}
				for k := range b.items {
					fwd.Messages[k] = &raftbusv1.PartitionedMessage{Message: b.msgs[k], PartitionId: b.id}
				}
				resp, err := raftbusv1.NewMessagingServiceClient(conn).SendEach(ctx, fwd)
				if err == nil && len(resp.GetResults()) != len(b.items) {
					err = apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "the leader answered %d results for %d messages", len(resp.GetResults()), len(b.items))
				}
				if err != nil {
					return nil, err
				}
				for _, r := range resp.GetResults() {
					r.Error = routing.ItemFailure(ctx, r.GetError())
				}
				return resp.GetResults(), nil
			})
			for k, i := range b.items {
				if err != nil {
					failed(i, err)
				} else {
					results[i] = out[k]
				}
			}
		}()
	}
	wg.Wait()
	return &raftbusv1.SendEachResponse{Results: results}, nil
}
