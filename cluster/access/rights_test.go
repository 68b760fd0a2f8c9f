package access

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestEveryPublicMethodHasTheRightsItShould lists what each method of the
// public services needs. A method added to a service fails this test until
// it is given its place here and in requirementOf.
func TestEveryPublicMethodHasTheRightsItShould(t *testing.T) {
	want := map[string]string{
		"Send": "send", "SendEach": "send", "Schedule": "send", "CancelScheduled": "send",
		"Receive": "listen", "ReceiveStream": "listen", "ReceiveDeferred": "listen", "Peek": "listen", "Complete": "listen", "Abandon": "listen",
		"DeadLetter": "listen", "Defer": "listen", "Settle": "listen", "RenewLock": "listen",
		"AcceptSession": "listen", "RenewSessionLock": "listen", "GetSessionState": "listen", "SetSessionState": "listen", "CloseSession": "listen",

		"CreateQueue": "manage namespace", "ListQueues": "manage namespace", "CreateTopic": "manage namespace", "ListTopics": "manage namespace",
		"GetClusterInfo": "manage namespace", "RemoveNode": "manage namespace", "DrainNode": "manage namespace", "UndrainNode": "manage namespace",
		"GetQueue": "manage", "UpdateQueue": "manage", "DeleteQueue": "manage", "GetQueueRuntimeProperties": "manage",
		"GetTopic": "manage", "UpdateTopic": "manage", "DeleteTopic": "manage", "GetTopicRuntimeProperties": "manage",
		"CreateSubscription": "manage", "GetSubscription": "manage", "UpdateSubscription": "manage", "DeleteSubscription": "manage",
		"ListSubscriptions": "manage", "GetSubscriptionRuntimeProperties": "manage",
		"CreateRule": "manage", "GetRule": "manage", "UpdateRule": "manage", "DeleteRule": "manage", "ListRules": "manage",
		"GetRoutingTable":    "send or listen",
		"CreateAccessPolicy": "manage", "ListAccessPolicies": "manage", "DeleteAccessPolicy": "manage", "RegenerateAccessPolicyKey": "manage",
	}
	seen := 0
	for _, svc := range []protoreflect.FullName{"raftbus.v1.MessagingService", "raftbus.v1.AdminService", "raftbus.v1.AccessService"} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(svc)
		if err != nil {
			t.Fatal(err)
		}
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			m := methods.Get(i)
			mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
			if err != nil {
				t.Fatal(err)
			}
			// Entity fields set, so that a requirement on an entity can
			// be told from one on the namespace.
			req := mt.New()
			setEntityFields(req, "e")
			got := requirementOf(req.Interface())
			desc := rightNames(got.rights)
			if len(got.entities) > 0 && got.entities[0] == "" {
				desc += " namespace"
			}
			if w, ok := want[string(m.Name())]; !ok || w != desc {
				t.Errorf("%s.%s needs %q, want %q", svc, m.Name(), desc, w)
			}
			seen++
		}
	}
	if seen != len(want) {
		t.Errorf("%d methods, %d expected", seen, len(want))
	}
}

// setEntityFields sets every string field that names an entity, at any
// depth of singular messages (and one element of repeated ones).
func setEntityFields(m protoreflect.Message, v string) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if o := f.ContainingOneof(); o != nil && m.WhichOneof(o) != nil {
			continue // the first of a oneof (a stream's open request)
		}
		switch {
		case f.Kind() == protoreflect.StringKind && !f.IsList() && !f.IsMap() &&
			(f.Name() == "entity_path" || f.Name() == "name" || strings.HasSuffix(string(f.Name()), "topic_name")):
			m.Set(f, protoreflect.ValueOfString(v))
		case f.Kind() == protoreflect.MessageKind && f.IsList():
			el := m.Mutable(f).List().AppendMutable()
			setEntityFields(el.Message(), v)
		case f.Kind() == protoreflect.MessageKind && !f.IsMap():
			setEntityFields(m.Mutable(f).Message(), v)
		}
	}
}

func TestScopes(t *testing.T) {
	for _, tc := range []struct {
		entity, res string
		within      bool
	}{
		{"orders", "", true}, {"orders", "orders", true}, {"t/subscriptions/s", "t", true},
		{"orders2", "orders", false}, {"", "orders", false}, {"other", "orders", false},
		// The Azure SDKs sign lower-cased resources.
		{"Orders", "orders", true}, {"T/Subscriptions/S", "t/subscriptions/s", true}, {"T/subscriptions/s", "t", true},
		{"Orders2", "orders", false}, {"orders", "orders/$deadletterqueue", false},
	} {
		if got := within(tc.entity, tc.res); got != tc.within {
			t.Errorf("within(%q, %q) = %v", tc.entity, tc.res, got)
		}
	}
	if scopeOf("t/subscriptions/s") != "t" || scopeOf("q") != "q" {
		t.Error("scopeOf")
	}
	manageOnly := []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_MANAGE}
	if !grants(manageOnly, send) || grants(send, listen) || !grants(send, anyRight) {
		t.Error("grants")
	}
}
