package service

import (
	"context"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/routing"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Settle settles many locks at once. The settlements of one partition go
// to its leader together (one forwarded request when it is elsewhere) and
// are proposed together, so they share log entries; each keeps its own
// outcome.
func (s *Messaging) Settle(ctx context.Context, req *raftbusv1.SettleRequest) (*raftbusv1.SettleResponse, error) {
	all := req.GetSettlements()
	if n := len(all); n == 0 || n > MaxBatch {
		return nil, apierror.Invalid("a settle carries 1 to %d settlements, not %d", MaxBatch, n)
	}
	results := make([]*raftbusv1.SettleResult, len(all))
	failed := func(i int, err error) { results[i] = &raftbusv1.SettleResult{Error: apierror.Info(err)} }

	// The settlements of each partition, in request order.
	type partitionKey struct {
		entity      string
		incarnation uint64
		id          uint32
	}
	type batch struct {
		t     resolved
		id    uint32
		items []int
		cmds  []*enginev1.Command
	}
	var order []*batch
	batches := map[partitionKey]*batch{}
	for i, st := range all {
		cmd, t, err := s.settleCommand(ctx, st)
		if err != nil {
			failed(i, err)
			continue
		}
		key := partitionKey{t.entity.GetName(), t.entity.GetIncarnation(), st.GetLock().GetPartitionId()}
		b := batches[key]
		if b == nil {
			b = &batch{t: t, id: key.id}
			batches[key] = b
			order = append(order, b)
		}
		b.items = append(b.items, i)
		b.cmds = append(b.cmds, &enginev1.Command{Body: &enginev1.Command_Settle{Settle: cmd}})
	}

	var wg sync.WaitGroup
	for _, b := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := route(ctx, s.node, b.t.entity, b.id, routing.Idempotent, func(r Replica) ([]*raftbusv1.SettleResult, error) {
				applied := r.ApplyAll(ctx, b.cmds)
				out := make([]*raftbusv1.SettleResult, len(applied))
				for k, a := range applied {
					out[k] = &raftbusv1.SettleResult{}
					if a.Err != nil {
						out[k].Error = apierror.Info(a.Err)
					}
				}
				return out, nil
			}, func(ctx context.Context, conn grpc.ClientConnInterface) ([]*raftbusv1.SettleResult, error) {
				fwd := &raftbusv1.SettleRequest{Settlements: make([]*raftbusv1.Settlement, len(b.items))}
				for k, i := range b.items {
					fwd.Settlements[k] = all[i]
				}
				resp, err := raftbusv1.NewMessagingServiceClient(conn).Settle(ctx, fwd)
				if err == nil && len(resp.GetResults()) != len(b.items) {
					err = apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "the leader answered %d results for %d settlements", len(resp.GetResults()), len(b.items))
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
	return &raftbusv1.SettleResponse{Results: results}, nil
}

// settleCommand checks one settlement and makes its engine command.
func (s *Messaging) settleCommand(ctx context.Context, st *raftbusv1.Settlement) (*enginev1.Settle, resolved, error) {
	lock := st.GetLock()
	if lock == nil {
		return nil, resolved{}, apierror.Invalid("lock is required")
	}
	cmd := &enginev1.Settle{PropertiesToModify: st.GetPropertiesToModify(), SettlementId: st.GetSettlementId()}
	switch st.GetDisposition() {
	case raftbusv1.Disposition_DISPOSITION_COMPLETE:
		cmd.Disposition = enginev1.Disposition_DISPOSITION_COMPLETE
		if len(st.GetPropertiesToModify()) > 0 {
			return nil, resolved{}, apierror.Invalid("a completed message's properties cannot be modified")
		}
	case raftbusv1.Disposition_DISPOSITION_ABANDON:
		cmd.Disposition = enginev1.Disposition_DISPOSITION_ABANDON
	case raftbusv1.Disposition_DISPOSITION_DEFER:
		cmd.Disposition = enginev1.Disposition_DISPOSITION_DEFER
	case raftbusv1.Disposition_DISPOSITION_DEAD_LETTER:
		cmd.Disposition = enginev1.Disposition_DISPOSITION_DEAD_LETTER
		cmd.DeadLetterReason, cmd.DeadLetterErrorDescription = st.GetDeadLetterReason(), st.GetDeadLetterErrorDescription()
	default:
		return nil, resolved{}, apierror.Invalid("disposition %v is not one of complete, abandon, dead-letter or defer", st.GetDisposition())
	}
	if st.GetDisposition() != raftbusv1.Disposition_DISPOSITION_DEAD_LETTER && (st.GetDeadLetterReason() != "" || st.GetDeadLetterErrorDescription() != "") {
		return nil, resolved{}, apierror.Invalid("a dead-letter reason or description goes with DISPOSITION_DEAD_LETTER only")
	}
	if err := checkDeadLetterText(st.GetDeadLetterReason(), st.GetDeadLetterErrorDescription()); err != nil {
		return nil, resolved{}, err
	}
	t, err := resolve(ctx, s.node, lock.GetEntityPath())
	if err != nil {
		return nil, resolved{}, err
	}
	cmd.EntityPath, cmd.SubQueue, cmd.LockToken = t.path, lock.GetSubQueue(), lock.GetLockToken()
	return cmd, t, nil
}

// checkDeadLetterText refuses a dead-letter reason or error description
// over MaxDeadLetterText characters.
func checkDeadLetterText(reason, description string) error {
	for _, f := range []struct{ name, text string }{{"reason", reason}, {"error_description", description}} {
		if n := utf8.RuneCountInString(f.text); n > MaxDeadLetterText {
			return apierror.Invalid("%s must be at most %d characters, not %d", f.name, MaxDeadLetterText, n)
		}
	}
	return nil
}
