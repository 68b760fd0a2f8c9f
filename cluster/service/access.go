package service

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/internal/sas"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Access is the AccessService: shared access policies in the metadata
// group. Who may call it is checked before it is reached (cluster/access).
type Access struct {
	raftbusv1.UnimplementedAccessServiceServer
	node Node
}

// NewAccess returns the AccessService of node.
func NewAccess(node Node) *Access { return &Access{node: node} }

// atLeader runs local at the metadata leader, or the same call there.
func accessAtLeader[Resp any](ctx context.Context, s *Access, read bool,
	local func() (Resp, error),
	remote func(ctx context.Context, c raftbusv1.AccessServiceClient) (Resp, error),
) (Resp, error) {
	var resp Resp
	err := s.node.AtMetaLeader(ctx, read, func() error {
		var err error
		resp, err = local()
		return err
	}, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		var err error
		resp, err = remote(ctx, raftbusv1.NewAccessServiceClient(conn))
		return err
	})
	return resp, err
}

func (s *Access) CreateAccessPolicy(ctx context.Context, req *raftbusv1.CreateAccessPolicyRequest) (*raftbusv1.CreateAccessPolicyResponse, error) {
	return accessAtLeader(ctx, s, false, func() (*raftbusv1.CreateAccessPolicyResponse, error) {
		p := proto.Clone(req.GetPolicy()).(*raftbusv1.AccessPolicy)
		if p == nil {
			return nil, apierror.Invalid("policy is required")
		}
		// Keys are made here, not in the state machine, which must be
		// deterministic.
		if p.PrimaryKey == "" {
			p.PrimaryKey = sas.NewKey()
		}
		if p.SecondaryKey == "" {
			p.SecondaryKey = sas.NewKey()
		}
		if err := s.put(ctx, p, true); err != nil {
			return nil, err
		}
		return &raftbusv1.CreateAccessPolicyResponse{Policy: s.find(p.GetEntityPath(), p.GetName())}, nil
	}, func(ctx context.Context, c raftbusv1.AccessServiceClient) (*raftbusv1.CreateAccessPolicyResponse, error) {
		return c.CreateAccessPolicy(ctx, req)
	})
}

func (s *Access) ListAccessPolicies(ctx context.Context, req *raftbusv1.ListAccessPoliciesRequest) (*raftbusv1.ListAccessPoliciesResponse, error) {
	return accessAtLeader(ctx, s, true, func() (*raftbusv1.ListAccessPoliciesResponse, error) {
		resp := &raftbusv1.ListAccessPoliciesResponse{}
		s.node.View(func(st *clusterv1.MetaSnapshot) {
			for _, p := range st.GetAccessPolicies() {
				if p.GetEntityPath() == req.GetEntityPath() {
					resp.Policies = append(resp.Policies, proto.Clone(p).(*raftbusv1.AccessPolicy))
				}
			}
		})
		return resp, nil
	}, func(ctx context.Context, c raftbusv1.AccessServiceClient) (*raftbusv1.ListAccessPoliciesResponse, error) {
		return c.ListAccessPolicies(ctx, req)
	})
}

func (s *Access) DeleteAccessPolicy(ctx context.Context, req *raftbusv1.DeleteAccessPolicyRequest) (*raftbusv1.DeleteAccessPolicyResponse, error) {
	return accessAtLeader(ctx, s, false, func() (*raftbusv1.DeleteAccessPolicyResponse, error) {
		_, err := s.node.Commit(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteAccessPolicy{DeleteAccessPolicy: &clusterv1.DeleteAccessPolicy{
			Name: req.GetName(), EntityPath: req.GetEntityPath(),
		}}})
		if err != nil {
			return nil, err
		}
		return &raftbusv1.DeleteAccessPolicyResponse{}, nil
	}, func(ctx context.Context, c raftbusv1.AccessServiceClient) (*raftbusv1.DeleteAccessPolicyResponse, error) {
		return c.DeleteAccessPolicy(ctx, req)
	})
}

func (s *Access) RegenerateAccessPolicyKey(ctx context.Context, req *raftbusv1.RegenerateAccessPolicyKeyRequest) (*raftbusv1.RegenerateAccessPolicyKeyResponse, error) {
	return accessAtLeader(ctx, s, false, func() (*raftbusv1.RegenerateAccessPolicyKeyResponse, error) {
		p := s.find(req.GetEntityPath(), req.GetName())
		if p == nil {
			return nil, apierror.NotFound("policy %q does not exist", req.GetName())
		}
		switch req.GetKey() {
		case raftbusv1.AccessKey_ACCESS_KEY_PRIMARY:
			p.PrimaryKey = sas.NewKey()
		case raftbusv1.AccessKey_ACCESS_KEY_SECONDARY:
			p.SecondaryKey = sas.NewKey()
		default:
			return nil, apierror.Invalid("key must be PRIMARY or SECONDARY")
		}
		if err := s.put(ctx, p, false); err != nil {
			return nil, err
		}
		return &raftbusv1.RegenerateAccessPolicyKeyResponse{Policy: s.find(p.GetEntityPath(), p.GetName())}, nil
	}, func(ctx context.Context, c raftbusv1.AccessServiceClient) (*raftbusv1.RegenerateAccessPolicyKeyResponse, error) {
		return c.RegenerateAccessPolicyKey(ctx, req)
	})
}

func (s *Access) put(ctx context.Context, p *raftbusv1.AccessPolicy, create bool) error {
	if reason := meta.CheckPolicy(p); reason != "" {
		return apierror.Invalid("%s", reason)
	}
	_, err := s.node.Commit(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutAccessPolicy{PutAccessPolicy: &clusterv1.PutAccessPolicy{Policy: p, Create: create}}})
	return err
}

// find returns a copy of the committed policy, or nil.
func (s *Access) find(entityPath, name string) *raftbusv1.AccessPolicy {
	var out *raftbusv1.AccessPolicy
	s.node.View(func(st *clusterv1.MetaSnapshot) {
		if p := meta.FindPolicy(st, entityPath, name); p != nil {
			out = proto.Clone(p).(*raftbusv1.AccessPolicy)
		}
	})
	return out
}
