package meta

import (
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// RootPolicyName is the namespace policy with every right that the
// cluster creates when it is first formed, as Service Bus names it.
const RootPolicyName = "RootManageSharedAccessKey"

// policyName is what a key name may be.
var policyName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,256}$`)

// maxKeyLength bounds a key: generated keys are 44 characters.
const maxKeyLength = 256

func policyIndex(s *clusterv1.MetaSnapshot, entityPath, name string) (int, bool) {
	return slices.BinarySearchFunc(s.AccessPolicies, [2]string{entityPath, name}, func(p *raftbusv1.AccessPolicy, k [2]string) int {
		if c := strings.Compare(p.GetEntityPath(), k[0]); c != 0 {
			return c
		}
		return strings.Compare(p.GetName(), k[1])
	})
}

// FindPolicy returns the policy named name at the scope entityPath ("" for
// the namespace) of s, or nil.
func FindPolicy(s *clusterv1.MetaSnapshot, entityPath, name string) *raftbusv1.AccessPolicy {
	if i, ok := policyIndex(s, entityPath, name); ok {
		return s.AccessPolicies[i]
	}
	return nil
}

// CheckPolicy validates a policy as the proposer hands it in, keys
// included; it returns the reason it is refused, or "".
func CheckPolicy(p *raftbusv1.AccessPolicy) string {
	if !policyName.MatchString(p.GetName()) {
		return "a policy name is 1 to 256 letters, digits, '.', '_' or '-'"
	}
	if len(p.GetRights()) == 0 {
		return "a policy needs at least one right (Manage, Send, Listen)"
	}
	seen := map[raftbusv1.AccessRight]bool{}
	for _, r := range p.GetRights() {
		if _, ok := raftbusv1.AccessRight_name[int32(r)]; !ok || r == raftbusv1.AccessRight_ACCESS_RIGHT_UNSPECIFIED || seen[r] {
			return "rights are Manage, Send and Listen, each at most once"
		}
		seen[r] = true
	}
	if seen[raftbusv1.AccessRight_ACCESS_RIGHT_MANAGE] && !(seen[raftbusv1.AccessRight_ACCESS_RIGHT_SEND] && seen[raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN]) {
		return "Manage comes with Send and Listen, as in Service Bus"
	}
	for _, k := range []string{p.GetPrimaryKey(), p.GetSecondaryKey()} {
		if k == "" || len(k) > maxKeyLength {
			return "a policy needs a primary and a secondary key of at most 256 characters"
		}
	}
	return ""
}

func putAccessPolicy(s *clusterv1.MetaSnapshot, put *clusterv1.PutAccessPolicy, now *timestamppb.Timestamp) *clusterv1.MetaResult {
	p := proto.Clone(put.GetPolicy()).(*raftbusv1.AccessPolicy)
	if reason := CheckPolicy(p); reason != "" {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "%s", reason)
	}
	if path := p.GetEntityPath(); path != "" {
		if e := FindEntity(s, path); e == nil {
			return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "entity %q does not exist", path)
		}
	}
	i, found := policyIndex(s, p.GetEntityPath(), p.GetName())
	switch {
	case put.GetCreate() && found:
		return failure(raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "policy %q of %s exists already", p.GetName(), scopeName(p.GetEntityPath()))
	case !put.GetCreate() && !found:
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "policy %q of %s does not exist", p.GetName(), scopeName(p.GetEntityPath()))
	case found:
		p.CreatedAt, p.UpdatedAt = s.AccessPolicies[i].GetCreatedAt(), now
		s.AccessPolicies[i] = p
	default:
		p.CreatedAt, p.UpdatedAt = now, now
		s.AccessPolicies = slices.Insert(s.AccessPolicies, i, p)
	}
	return &clusterv1.MetaResult{}
}

func deleteAccessPolicy(s *clusterv1.MetaSnapshot, d *clusterv1.DeleteAccessPolicy) *clusterv1.MetaResult {
	i, found := policyIndex(s, d.GetEntityPath(), d.GetName())
	if !found {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "policy %q of %s does not exist", d.GetName(), scopeName(d.GetEntityPath()))
	}
	s.AccessPolicies = slices.Delete(s.AccessPolicies, i, i+1)
	return &clusterv1.MetaResult{}
}

// deletePoliciesOf removes the policies of a deleted entity: one created
// later under the same name must not inherit them.
func deletePoliciesOf(s *clusterv1.MetaSnapshot, entityPath string) {
	s.AccessPolicies = slices.DeleteFunc(s.AccessPolicies, func(p *raftbusv1.AccessPolicy) bool { return p.GetEntityPath() == entityPath })
}

func scopeName(entityPath string) string {
	if entityPath == "" {
		return "the namespace"
	}
	return "entity " + entityPath
}
