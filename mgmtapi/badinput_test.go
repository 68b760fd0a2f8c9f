package mgmtapi

import (
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const queueEntry = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
	`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">%s</QueueDescription></content></entry>`

func queueBody(elements string) string { return strings.Replace(queueEntry, "%s", elements, 1) }

// Bad input is answered 400 with what is wrong, before anything is asked
// of the cluster: nothing changes.
func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	billionLaughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">` +
		`<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>` + queueBody("<LockDuration>&lol3;</LockDuration>")
	external := `<?xml version="1.0"?><!DOCTYPE e [<!ENTITY x SYSTEM "file:///etc/passwd">]>` + queueBody("<ForwardTo>&x;</ForwardTo>")
	cases := []struct {
		name, method, path, body string
		want                     string // in the detail
	}{
		{"malformed XML", "PUT", "/q", `<entry><content><QueueDescription>`, "malformed XML"},
		{"not XML", "PUT", "/q", `{"lockDuration": "PT1M"}`, "malformed XML"},
		{"empty body", "PUT", "/q", ``, "no root element"},
		{"billion laughs", "PUT", "/q", billionLaughs, "document type declaration"},
		{"external entity", "PUT", "/q", external, "document type declaration"},
		{"undeclared entity", "PUT", "/q", queueBody("<ForwardTo>&x;</ForwardTo>"), "malformed XML"},
		{"oversized body", "PUT", "/q", queueBody("<UserMetadata>" + strings.Repeat("x", MaxBodyBytes) + "</UserMetadata>"), "larger than"},
		{"too deep", "PUT", "/q", queueBody(strings.Repeat("<a>", 40) + strings.Repeat("</a>", 40)), "nested deeper"},
		{"not an entry", "PUT", "/q", `<QueueDescription/>`, "Atom entry"},
		{"no description", "PUT", "/q", `<entry xmlns="http://www.w3.org/2005/Atom"><content/></entry>`, "one description"},
		{"wrong description", "PUT", "/q", strings.ReplaceAll(queueBody(""), "QueueDescription", "RuleDescription"), "not a RuleDescription"},
		{"integer not a number", "PUT", "/q", queueBody("<MaxDeliveryCount>ten</MaxDeliveryCount>"), "MaxDeliveryCount"},
		{"integer too large", "PUT", "/q", queueBody("<MaxDeliveryCount>99999999999</MaxDeliveryCount>"), "MaxDeliveryCount"},
		{"bool not a bool", "PUT", "/q", queueBody("<RequiresSession>yes</RequiresSession>"), "RequiresSession"},
		{"duration not a duration", "PUT", "/q", queueBody("<LockDuration>1 minute</LockDuration>"), "LockDuration"},
		{"negative duration", "PUT", "/q", queueBody("<LockDuration>-PT1M</LockDuration>"), "negative"},
		{"status raftbus has not", "PUT", "/q", queueBody("<Status>Disabled</Status>"), "Status must be Active"},
		{"express entity", "PUT", "/q", queueBody("<EnableExpress>true</EnableExpress>"), "EnableExpress"},
		{"user metadata", "PUT", "/q", testdata(t, "python/create-queue-metadata.xml"), "UserMetadata"},
		{"authorization rules", "PUT", "/q", queueBody("<AuthorizationRules><AuthorizationRule/></AuthorizationRules>"), "AuthorizationRules"},
		{"duration property", "PUT", "/t/Subscriptions/s/Rules/r", testdata(t, "python/create-rule-duration.xml"), "duration values"},
		{"filter type", "PUT", "/t/Subscriptions/s/Rules/r", `<entry><content><RuleDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><Filter i:type="LuaFilter"/></RuleDescription></content></entry>`, "LuaFilter"},
		{"empty SQL filter", "PUT", "/t/Subscriptions/s/Rules/r", `<entry><content><RuleDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><Filter i:type="SqlFilter"><SqlExpression> </SqlExpression></Filter></RuleDescription></content></entry>`, "SqlExpression"},
		{"name character", "PUT", "/bad*name", queueBody(""), "not allowed"},
		{"name too long", "PUT", "/" + strings.Repeat("q", 261), queueBody(""), "1 to 260"},
		{"name doubled slash", "GET", "/a//b", "", "doubled"},
		{"subscription name", "PUT", "/t/Subscriptions/a.b!c", queueBody(""), "not allowed"},
		{"subscription name too long", "GET", "/t/Subscriptions/" + strings.Repeat("s", 51), "", "1 to 50"},
		{"rule name", "DELETE", "/t/Subscriptions/s/Rules/r%20r", "", "not allowed"},
		{"api-version", "GET", "/q?api-version=latest", "", "api-version"},
		{"$top", "GET", "/$Resources/Queues?$top=-1", "", "$top"},
		{"$skip", "GET", "/$Resources/Queues?$skip=many", "", "$skip"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t)
			s.admin.queues["q"] = &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(1)}
			s.admin.topics["t"] = &raftbusv1.TopicProperties{Name: "t", PartitionCount: proto.Uint32(1)}
			s.admin.subs["t/s"] = &raftbusv1.SubscriptionProperties{TopicName: "t", SubscriptionName: "s"}
			s.admin.rules["t/s"] = map[string]*raftbusv1.RuleProperties{}
			before := proto.Clone(s.admin.queues["q"])
			for _, update := range []bool{false, true} {
				var headers []string
				if update {
					headers = []string{"If-Match", "*"}
				}
				resp := s.do(c.method, c.path, c.body, headers...)
				if resp.Code != http.StatusBadRequest || !strings.Contains(resp.Body.String(), c.want) {
					t.Fatalf("update %v: %d %s, want 400 saying %q", update, resp.Code, resp.Body, c.want)
				}
			}
			if len(s.admin.writes) != 0 || !proto.Equal(before, s.admin.queues["q"]) {
				t.Fatalf("the bad request changed something: %v", s.admin.writes)
			}
		})
	}
}

// Elements Service Bus has and raftbus does not read, and elements of no
// known description, are ignored, as Service Bus ignores elements it does
// not know; a value raftbus has the same of is taken.
func TestUnknownElementsAreIgnored(t *testing.T) {
	s := newServer(t)
	body := queueBody(`<MaxDeliveryCount>4</MaxDeliveryCount><FancyNewSetting>42</FancyNewSetting>` +
		`<x:Other xmlns:x="urn:x"><Deep>1</Deep></x:Other><Status>Active</Status><EnableExpress>false</EnableExpress>` +
		`<IsAnonymousAccessible>false</IsAnonymousAccessible><AuthorizationRules/><EntityAvailabilityStatus>Available</EntityAvailabilityStatus>` +
		`<SizeInBytes>99</SizeInBytes><CountDetails><ActiveMessageCount>5</ActiveMessageCount></CountDetails><CreatedAt>2020-01-01T00:00:00Z</CreatedAt>`)
	if resp := s.do(http.MethodPut, "/q", body); resp.Code != http.StatusCreated {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	want := &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "q", MaxDeliveryCount: proto.Int32(4)}}
	if len(s.admin.writes) != 1 || !proto.Equal(want, s.admin.writes[0]) {
		t.Fatalf("writes %v, want %v", s.admin.writes, want)
	}
}

// An update may send back the partitioning the entity has, not another.
func TestPartitioningIsFixedAtCreation(t *testing.T) {
	s := newServer(t)
	s.admin.queues["q"] = &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(4)}
	if resp := s.do(http.MethodPut, "/q", queueBody("<EnablePartitioning>true</EnablePartitioning>"), "If-Match", "*"); resp.Code != http.StatusOK {
		t.Fatalf("same partitioning: %d %s", resp.Code, resp.Body)
	}
	if got := s.admin.writes[0].(*raftbusv1.UpdateQueueRequest).GetQueue().PartitionCount; got != nil {
		t.Fatalf("the update asks for partition count %d", *got)
	}
	resp := s.do(http.MethodPut, "/q", queueBody("<EnablePartitioning>false</EnablePartitioning>"), "If-Match", "*")
	if resp.Code != http.StatusBadRequest || !strings.Contains(resp.Body.String(), "fixed at creation") {
		t.Fatalf("other partitioning: %d %s", resp.Code, resp.Body)
	}
	if len(s.admin.writes) != 1 {
		t.Fatalf("the refused update was asked for: %v", s.admin.writes)
	}
}
