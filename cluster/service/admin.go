package service

import (
	"context"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/engine"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// MaxPartitions is the most partitions an entity may have.
const MaxPartitions = 16

// readyTimeout bounds how long CreateQueue waits for the new partitions to
// elect leaders, so that a send right after it succeeds.
const readyTimeout = 15 * time.Second

// preferredLeaderWait bounds how long CreateQueue waits, once every
// partition has a leader, for leadership to settle on the preferred nodes.
const preferredLeaderWait = 3 * time.Second

// Config is what the services are told when they start.
type Config struct {
	// DefaultPartitions is the partition count of entities created
	// without one.
	DefaultPartitions uint32
}

// Admin implements raftbus.v1.AdminService. Every call is served by the
// metadata leader (forwarded there), so a read sees every change
// acknowledged before it.
type Admin struct {
	raftbusv1.UnimplementedAdminServiceServer
	node Node
	cfg  Config
}

// NewAdmin is the admin service of node.
func NewAdmin(node Node, cfg Config) *Admin { return &Admin{node: node, cfg: cfg} }

func (s *Admin) CreateQueue(ctx context.Context, req *raftbusv1.CreateQueueRequest) (*raftbusv1.CreateQueueResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.CreateQueueResponse, error) {
		q := proto.Clone(req.GetQueue()).(*raftbusv1.QueueProperties)
		if q == nil {
			return nil, apierror.Invalid("queue is required")
		}
		if q.PartitionCount == nil {
			q.PartitionCount = proto.Uint32(s.cfg.DefaultPartitions)
		}
		e, err := s.putQueue(ctx, q, true)
		if err != nil {
			return nil, err
		}
		if err := s.awaitReady(ctx, e); err != nil {
			return nil, err
		}
		return &raftbusv1.CreateQueueResponse{Queue: e.GetQueue()}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.CreateQueueResponse, error) {
		return c.CreateQueue(ctx, req)
	})
}

func (s *Admin) UpdateQueue(ctx context.Context, req *raftbusv1.UpdateQueueRequest) (*raftbusv1.UpdateQueueResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.UpdateQueueResponse, error) {
		q := req.GetQueue()
		if q == nil {
			return nil, apierror.Invalid("queue is required")
		}
		s.node.View(func(st *clusterv1.MetaSnapshot) {
			if old := meta.FindEntity(st, q.GetName()).GetQueue(); old != nil {
				q = overlay(old, q)
			}
		})
		e, err := s.putQueue(ctx, q, false)
		if err != nil {
			return nil, err
		}
		if err := s.awaitConfigured(ctx, e); err != nil {
			return nil, err
		}
		return &raftbusv1.UpdateQueueResponse{Queue: e.GetQueue()}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.UpdateQueueResponse, error) {
		return c.UpdateQueue(ctx, req)
	})
}

// overlay is an update applied to current settings: the fields the update
// sets replace theirs whole, unset ones keep their value. (proto.Merge
// would merge a duration field by field: 90s laid over an unlimited time
// to live would keep its nanoseconds.) The metadata fields are the
// broker's.
func overlay[T proto.Message](current, update T) T {
	out := proto.Clone(current).(T)
	o := out.ProtoReflect()
	proto.Clone(update).ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if name := fd.Name(); name != "created_at" && name != "updated_at" {
			o.Set(fd, v)
		}
		return true
	})
	return out
}

// putQueue validates and commits a queue definition.
func (s *Admin) putQueue(ctx context.Context, q *raftbusv1.QueueProperties, create bool) (*clusterv1.Entity, error) {
	if err := checkEntityName("queue", q.GetName()); err != nil {
		return nil, err
	}
	q, err := engine.NormalizeQueueProperties(q)
	if err != nil {
		return nil, apierror.From(err)
	}
	if q.GetPartitionCount() > MaxPartitions {
		return nil, apierror.Invalid("partition_count must be between 1 and %d, not %d", MaxPartitions, q.GetPartitionCount())
	}
	res, err := s.node.Commit(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutQueue{PutQueue: &clusterv1.PutQueue{Queue: q, Create: create, CheckForwarding: true}}})
	if err != nil {
		return nil, err
	}
	return res.GetEntity(), nil
}

// awaitReady waits until every partition of e answers through its leader,
// and then, for a little longer, until each is led by its preferred node,
// so that the nodes hand leadership to the preferred ones before the
// caller starts using the entity rather than under its first requests.
func (s *Admin) awaitReady(ctx context.Context, e *clusterv1.Entity) error {
	ctx, cancel := context.WithTimeout(routing.Internal(ctx), readyTimeout)
	defer cancel()
	for id := range e.GetPartitions() {
		for attempt := 0; ; attempt++ {
			_, err := s.partitionRuntime(ctx, e, e.GetName(), uint32(id))
			if err == nil {
				break
			}
			if !apierror.From(err).Retryable {
				return err
			}
			select {
			case <-ctx.Done():
				return apierror.Busy("entity %q was created but partition %d has not elected a leader yet: %v", e.GetName(), id, err)
			case <-time.After(readyPoll(attempt)):
			}
		}
	}
	addrs := s.node.NodeAddrs()
	settled := time.Now().Add(preferredLeaderWait)
	for attempt := 0; time.Now().Before(settled); attempt++ {
		preferred := true
		for id, v := range s.node.Views(ctx, e) {
			preferred = preferred && v.LeaderAddr == addrs[e.GetPartitions()[id].GetNodeIds()[0]]
		}
		if preferred {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(readyPoll(attempt)):
		}
	}
	return nil
}

// readyPoll spaces the looks at a new entity's partitions: a new group
// elects its leader in a few milliseconds (its preferred leader stands at
// once), so the first looks come soon after each other.
func readyPoll(attempt int) time.Duration {
	return min(5*time.Millisecond<<min(attempt, 6), 200*time.Millisecond)
}

func (s *Admin) GetQueue(ctx context.Context, req *raftbusv1.GetQueueRequest) (*raftbusv1.GetQueueResponse, error) {
	return readAtMetaLeader(ctx, s.node, func() (*raftbusv1.GetQueueResponse, error) {
		e, err := s.queue(ctx, req.GetName())
		if err != nil {
			return nil, err
		}
		return &raftbusv1.GetQueueResponse{Queue: e.GetQueue()}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.GetQueueResponse, error) {
		return c.GetQueue(ctx, req)
	})
}

func (s *Admin) DeleteQueue(ctx context.Context, req *raftbusv1.DeleteQueueRequest) (*raftbusv1.DeleteQueueResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.DeleteQueueResponse, error) {
		if _, err := s.queue(ctx, req.GetName()); err != nil {
			return nil, err
		}
		_, err := s.node.Commit(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteEntity{DeleteEntity: &clusterv1.DeleteEntity{Name: req.GetName()}}})
		if err != nil {
			return nil, err
		}
		return &raftbusv1.DeleteQueueResponse{}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.DeleteQueueResponse, error) {
		return c.DeleteQueue(ctx, req)
	})
}

func (s *Admin) ListQueues(ctx context.Context, req *raftbusv1.ListQueuesRequest) (*raftbusv1.ListQueuesResponse, error) {
	return readAtMetaLeader(ctx, s.node, func() (*raftbusv1.ListQueuesResponse, error) {
		size, err := pageSize(req.GetPageSize())
		if err != nil {
			return nil, err
		}
		resp := &raftbusv1.ListQueuesResponse{}
		s.node.View(func(st *clusterv1.MetaSnapshot) {
			i := sort.Search(len(st.Entities), func(i int) bool { return st.Entities[i].GetName() > req.GetPageToken() })
			for ; i < len(st.Entities); i++ {
				if len(resp.Queues) == size {
					resp.NextPageToken = resp.Queues[size-1].GetName()
					break
				}
				if q := st.Entities[i].GetQueue(); q != nil {
					resp.Queues = append(resp.Queues, proto.Clone(q).(*raftbusv1.QueueProperties))
				}
			}
		})
		return resp, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.ListQueuesResponse, error) {
		return c.ListQueues(ctx, req)
	})
}

func (s *Admin) GetQueueRuntimeProperties(ctx context.Context, req *raftbusv1.GetQueueRuntimePropertiesRequest) (*raftbusv1.GetQueueRuntimePropertiesResponse, error) {
	e, err := s.queue(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	props, err := s.runtimeProperties(ctx, e, e.GetName())
	if err != nil {
		return nil, err
	}
	props.CreatedAt, props.UpdatedAt = e.GetQueue().GetCreatedAt(), e.GetQueue().GetUpdatedAt()
	return &raftbusv1.GetQueueRuntimePropertiesResponse{Properties: props}, nil
}

// awaitConfigured waits until the leader of every partition of e has
// configured its engine with e's generation, so that a change answered to
// the caller applies to every message the caller sends afterwards.
func (s *Admin) awaitConfigured(ctx context.Context, e *clusterv1.Entity) error {
	ctx, cancel := context.WithTimeout(routing.Internal(ctx), readyTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		lagging := -1
		for id, v := range s.node.Views(ctx, e) {
			if v.Configured < e.GetGeneration() {
				lagging = id
				break
			}
		}
		if lagging < 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return apierror.Busy("the change to %q is committed but partition %d has not applied it yet", e.GetName(), lagging)
		case <-time.After(routing.Backoff(attempt)):
		}
	}
}

// runtimeProperties sums the counts of path (an entity of e, or e itself)
// over e's partitions.
func (s *Admin) runtimeProperties(ctx context.Context, e *clusterv1.Entity, path string) (*raftbusv1.RuntimeProperties, error) {
	props := &raftbusv1.RuntimeProperties{EntityPath: path}
	for id := range e.GetPartitions() {
		p, err := s.partitionRuntime(ctx, e, path, uint32(id))
		if err != nil {
			return nil, err
		}
		props.Partitions = append(props.Partitions, p)
		props.ActiveMessageCount += p.GetActiveMessageCount()
		props.ScheduledMessageCount += p.GetScheduledMessageCount()
		props.DeferredMessageCount += p.GetDeferredMessageCount()
		props.DeadLetterMessageCount += p.GetDeadLetterMessageCount()
		props.TransferMessageCount += p.GetTransferMessageCount()
		props.LockedMessageCount += p.GetLockedMessageCount()
		props.SizeInBytes += p.GetSizeInBytes()
		props.SessionCount += p.GetSessionCount()
	}
	props.TotalMessageCount = props.ActiveMessageCount + props.ScheduledMessageCount + props.DeferredMessageCount + props.DeadLetterMessageCount +
		props.TransferMessageCount
	return props, nil
}

// queue returns the committed definition of a queue, or NOT_FOUND.
func (s *Admin) queue(ctx context.Context, name string) (*clusterv1.Entity, error) {
	e, err := s.node.Entity(ctx, name)
	if err != nil {
		return nil, err
	}
	if e.GetKind() != clusterv1.EntityKind_ENTITY_KIND_QUEUE {
		return nil, apierror.NotFound("%q is not a queue", name)
	}
	return e, nil
}

// partitionRuntime reads one partition's counts from its leader.
func (s *Admin) partitionRuntime(ctx context.Context, e *clusterv1.Entity, path string, id uint32) (*raftbusv1.PartitionRuntimeProperties, error) {
	return route(ctx, s.node, e, id, routing.Idempotent, func(r Replica) (*raftbusv1.PartitionRuntimeProperties, error) {
		var props *raftbusv1.PartitionRuntimeProperties
		var rerr error
		if err := r.Read(ctx, func(en *engine.Engine) { props, rerr = en.RuntimeProperties(path) }); err != nil {
			return nil, err
		}
		return props, rerr
	}, func(ctx context.Context, conn grpc.ClientConnInterface) (*raftbusv1.PartitionRuntimeProperties, error) {
		resp, err := clusterv1.NewNodeServiceClient(conn).PartitionRuntime(ctx, &clusterv1.PartitionRuntimeRequest{EntityPath: path, PartitionId: id})
		return resp.GetProperties(), err
	})
}

// RemoveNode takes a node that is gone for good out of the cluster: its
// replicas are re-created on the others, then it leaves the metadata
// group, and its id is never let in again.
func (s *Admin) RemoveNode(ctx context.Context, req *raftbusv1.RemoveNodeRequest) (*raftbusv1.RemoveNodeResponse, error) {
	return changeMembership(ctx, s, req.GetNodeId(), raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED, &raftbusv1.RemoveNodeResponse{},
		func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.RemoveNodeResponse, error) {
			return c.RemoveNode(ctx, req)
		})
}

// DrainNode moves every replica off a node, leadership first.
func (s *Admin) DrainNode(ctx context.Context, req *raftbusv1.DrainNodeRequest) (*raftbusv1.DrainNodeResponse, error) {
	return changeMembership(ctx, s, req.GetNodeId(), raftbusv1.NodeMembership_NODE_MEMBERSHIP_DRAINING, &raftbusv1.DrainNodeResponse{},
		func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.DrainNodeResponse, error) {
			return c.DrainNode(ctx, req)
		})
}

// UndrainNode makes a draining node active again.
func (s *Admin) UndrainNode(ctx context.Context, req *raftbusv1.UndrainNodeRequest) (*raftbusv1.UndrainNodeResponse, error) {
	return changeMembership(ctx, s, req.GetNodeId(), raftbusv1.NodeMembership_NODE_MEMBERSHIP_UNSPECIFIED, &raftbusv1.UndrainNodeResponse{},
		func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.UndrainNodeResponse, error) {
			return c.UndrainNode(ctx, req)
		})
}

func changeMembership[Resp any](ctx context.Context, s *Admin, id string, m raftbusv1.NodeMembership, ok Resp,
	remote func(ctx context.Context, c raftbusv1.AdminServiceClient) (Resp, error),
) (Resp, error) {
	if id == "" {
		var zero Resp
		return zero, apierror.Invalid("a node id is required")
	}
	return atMetaLeader(ctx, s.node, func() (Resp, error) {
		if err := s.node.ChangeMembership(ctx, id, m); err != nil {
			var zero Resp
			return zero, err
		}
		return ok, nil
	}, remote)
}
