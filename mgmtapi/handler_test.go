package mgmtapi

import (
	"encoding/xml"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// server is a handler over a fake admin service.
type server struct {
	t     *testing.T
	admin *fakeAdmin
	h     *Handler
}

func newServer(t *testing.T) *server {
	admin := newFakeAdmin()
	return &server{t: t, admin: admin, h: New(Config{Admin: admin})}
}

// do serves one request; headers are name, value pairs.
func (s *server) do(method, target, body string, headers ...string) *httptest.ResponseRecorder {
	s.t.Helper()
	r := httptest.NewRequest(method, "https://localhost:5300"+target, strings.NewReader(body))
	r.Host = "localhost:5300"
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	return w
}

func testdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// requestCase is a request body an SDK sent (captured from it, in
// testdata/<sdk>/file) and the admin call it must become.
type requestCase struct {
	file, path string
	ifMatch    bool
	want       proto.Message
}

// The bodies the Python SDK (Debian's python3-azure) sends, captured from
// it, become the admin calls their settings say.
func TestPythonRequestsBecomeTheAdminCalls(t *testing.T) {
	runRequestCases(t, "python", "2021-05", []requestCase{
		{"create-queue-defaults.xml", "/q1", false, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "q1"}}},
		{"create-queue.xml", "/q2", false, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{
			Name: "q2", LockDuration: sec(30), MaxSizeInMegabytes: proto.Int64(2048), RequiresDuplicateDetection: proto.Bool(true),
			RequiresSession: proto.Bool(true), DefaultMessageTimeToLive: sec(3600), DeadLetteringOnMessageExpiration: proto.Bool(true),
			DuplicateDetectionHistoryTimeWindow: sec(300), MaxDeliveryCount: proto.Int32(5), AutoDeleteOnIdle: sec(600),
			PartitionCount: proto.Uint32(partitionedCount), ForwardTo: "other", ForwardDeadLetteredMessagesTo: "dlq",
			MaxMessageSizeInKilobytes: proto.Int64(512)}}},
		{"create-topic.xml", "/t1", false, &raftbusv1.CreateTopicRequest{Topic: &raftbusv1.TopicProperties{
			Name: "t1", DefaultMessageTimeToLive: sec(120), MaxSizeInMegabytes: proto.Int64(1024), SupportOrdering: proto.Bool(true)}}},
		{"create-subscription.xml", "/t1/subscriptions/s1", false, &raftbusv1.CreateSubscriptionRequest{Subscription: &raftbusv1.SubscriptionProperties{
			TopicName: "t1", SubscriptionName: "s1", LockDuration: sec(45), DeadLetteringOnFilterEvaluationExceptions: proto.Bool(false),
			MaxDeliveryCount: proto.Int32(3), ForwardTo: "q1"}}},
		{"create-rule-sql.xml", "/t1/subscriptions/s1/rules/r-sql", false, &raftbusv1.CreateRuleRequest{TopicName: "t1", SubscriptionName: "s1",
			Rule: func() *raftbusv1.RuleProperties {
				r := sqlRule("r-sql", "color = @c AND size > 3", map[string]*raftbusv1.PropertyValue{"@c": str("red")})
				r.Action = &raftbusv1.SqlRuleAction{SqlExpression: "SET sys.Label = 'x'; SET n = @n", Parameters: map[string]*raftbusv1.PropertyValue{"@n": i32(7)}}
				return r
			}()}},
		{"create-rule-correlation.xml", "/t1/subscriptions/s1/rules/r-corr", false, &raftbusv1.CreateRuleRequest{TopicName: "t1", SubscriptionName: "s1",
			Rule: &raftbusv1.RuleProperties{Name: "r-corr", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_CorrelationFilter{CorrelationFilter: &raftbusv1.CorrelationFilter{
				CorrelationId: "cid", MessageId: "mid", To: "to", ReplyTo: "rt", Subject: "lbl", SessionId: "sid", ReplyToSessionId: "rsid", ContentType: "ct",
				ApplicationProperties: map[string]*raftbusv1.PropertyValue{
					"s": str("v"), "i": i32(5),
					"l": {Value: &raftbusv1.PropertyValue_IntValue{IntValue: 1 << 40}},
					"b": {Value: &raftbusv1.PropertyValue_BoolValue{BoolValue: true}},
					"d": {Value: &raftbusv1.PropertyValue_DoubleValue{DoubleValue: 1.5}},
					"t": {Value: &raftbusv1.PropertyValue_TimestampValue{TimestampValue: timestamppb.New(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))}},
				}}}}}}},
		{"create-rule-true.xml", "/t1/subscriptions/s1/rules/r-true", false, &raftbusv1.CreateRuleRequest{TopicName: "t1", SubscriptionName: "s1", Rule: trueRule("r-true")}},
		{"create-rule-default.xml", "/t1/subscriptions/s1/rules/r-default", false, &raftbusv1.CreateRuleRequest{TopicName: "t1", SubscriptionName: "s1", Rule: trueRule("r-default")}},
		{"create-rule-false.xml", "/t1/subscriptions/s1/rules/r-false", false, &raftbusv1.CreateRuleRequest{TopicName: "t1", SubscriptionName: "s1",
			Rule: &raftbusv1.RuleProperties{Name: "r-false", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_FalseFilter{FalseFilter: &raftbusv1.FalseFilter{}}}}}},
		// What get_queue read, changed and sent back with If-Match: the
		// counts and times it read are the broker's and are left out,
		// TimeSpan.MaxValue (rounded by Python) is "unlimited", and the
		// partitioning it has is no change.
		{"update-queue.xml", "/q1", true, &raftbusv1.UpdateQueueRequest{Queue: &raftbusv1.QueueProperties{
			Name: "q1", LockDuration: sec(20), MaxSizeInMegabytes: proto.Int64(1024), RequiresDuplicateDetection: proto.Bool(false),
			RequiresSession: proto.Bool(false), DefaultMessageTimeToLive: unlimitedDuration, DeadLetteringOnMessageExpiration: proto.Bool(false),
			DuplicateDetectionHistoryTimeWindow: sec(600), MaxDeliveryCount: proto.Int32(7), EnableBatchedOperations: proto.Bool(true),
			ForwardTo: "other", AutoDeleteOnIdle: unlimitedDuration, MaxMessageSizeInKilobytes: proto.Int64(256)}}},
	})
}

// runRequestCases sends each case's body as the SDK did and checks the
// one admin call it became.
func runRequestCases(t *testing.T, sdk, version string, cases []requestCase) {
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			// What the request needs to be there: the queue it updates,
			// the topic of a subscription, the subscription of a rule.
			s := newServer(t)
			path := strings.ToLower(c.path)
			if c.ifMatch {
				s.admin.queues["q1"] = &raftbusv1.QueueProperties{Name: "q1", PartitionCount: proto.Uint32(1)}
			}
			if strings.Contains(path, "/subscriptions/") {
				s.admin.topics["t1"] = &raftbusv1.TopicProperties{Name: "t1", PartitionCount: proto.Uint32(1)}
			}
			if strings.Contains(path, "/rules/") {
				s.admin.subs["t1/s1"] = &raftbusv1.SubscriptionProperties{TopicName: "t1", SubscriptionName: "s1"}
				s.admin.rules["t1/s1"] = map[string]*raftbusv1.RuleProperties{}
				if c.ifMatch {
					s.admin.rules["t1/s1"]["r-sql"] = trueRule("r-sql")
				}
			}
			var headers []string
			if c.ifMatch {
				headers = []string{"If-Match", "*"}
			}
			resp := s.do(http.MethodPut, c.path+"?api-version="+version, testdata(t, sdk+"/"+c.file), headers...)
			wantStatus := http.StatusCreated
			if c.ifMatch {
				wantStatus = http.StatusOK
			}
			if resp.Code != wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.Code, wantStatus, resp.Body)
			}
			if len(s.admin.writes) != 1 {
				t.Fatalf("%d changes, want 1: %v", len(s.admin.writes), s.admin.writes)
			}
			if !proto.Equal(c.want, s.admin.writes[0]) {
				t.Fatalf("the admin call is\n%s\nwant\n%s", prototext.Format(s.admin.writes[0]), prototext.Format(c.want))
			}
			if ct := resp.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/atom+xml") {
				t.Errorf("content type %q", ct)
			}
		})
	}
}

// atomEntry is what a test reads of an answer.
type atomEntry struct {
	XMLName xml.Name `xml:"http://www.w3.org/2005/Atom entry"`
	ID      string   `xml:"http://www.w3.org/2005/Atom id"`
	Title   string   `xml:"http://www.w3.org/2005/Atom title"`
	Content struct {
		Type  string    `xml:"type,attr"`
		Inner innerDesc `xml:",any"`
	} `xml:"http://www.w3.org/2005/Atom content"`
}

type innerDesc struct {
	XMLName xml.Name
	Fields  []struct {
		XMLName xml.Name
		Attrs   []xml.Attr `xml:",any,attr"`
		Text    string     `xml:",chardata"`
		Inner   []struct {
			XMLName xml.Name
			Text    string `xml:",chardata"`
		} `xml:",any"`
	} `xml:",any"`
}

// field is the text of the description's element local, and whether it
// is there.
func (d innerDesc) field(local string) (string, bool) {
	for _, f := range d.Fields {
		if f.XMLName.Local == local {
			return f.Text, true
		}
	}
	return "", false
}

func readEntryAnswer(t *testing.T, body string) atomEntry {
	t.Helper()
	var e atomEntry
	if err := xml.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("answer is no Atom entry: %v\n%s", err, body)
	}
	return e
}

// A GET answers the queue's settings with its counts, in the namespaces
// and forms Service Bus writes them.
func TestGetAnswersSettingsAndCounts(t *testing.T) {
	s := newServer(t)
	s.admin.queues["orders"] = &raftbusv1.QueueProperties{Name: "orders", LockDuration: sec(30), MaxDeliveryCount: proto.Int32(10),
		DefaultMessageTimeToLive: unlimitedDuration, ForwardTo: "audit", PartitionCount: proto.Uint32(4), MaxMessageSizeInKilobytes: proto.Int64(256),
		CreatedAt: created, UpdatedAt: created}
	s.admin.counts["orders"] = &raftbusv1.RuntimeProperties{ActiveMessageCount: 3, DeadLetterMessageCount: 2, ScheduledMessageCount: 1,
		TransferMessageCount: 4, TotalMessageCount: 10, SizeInBytes: 1234, AccessedAt: created}
	resp := s.do(http.MethodGet, "/orders?api-version=2021-05", "")
	if resp.Code != http.StatusOK {
		t.Fatalf("status %d: %s", resp.Code, resp.Body)
	}
	e := readEntryAnswer(t, resp.Body.String())
	if e.Title != "orders" || e.ID != "https://localhost:5300/orders?api-version=2021-05" {
		t.Errorf("title %q, id %q", e.Title, e.ID)
	}
	d := e.Content.Inner
	if d.XMLName.Space != nsServiceBus || d.XMLName.Local != "QueueDescription" {
		t.Fatalf("content is %v", d.XMLName)
	}
	for local, want := range map[string]string{
		"LockDuration": "PT30S", "MaxDeliveryCount": "10", "DefaultMessageTimeToLive": timeSpanMax,
		"ForwardTo": "sb://localhost:5300/audit", "EnablePartitioning": "true", "SizeInBytes": "1234", "MessageCount": "10",
		"MaxMessageSizeInKilobytes": "256", "Status": "Active", "CreatedAt": formatTime(created.AsTime()),
		"AccessedAt": formatTime(created.AsTime()),
	} {
		if got, ok := d.field(local); !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q", local, got, ok, want)
		}
	}
	var counts map[string]string
	for _, f := range d.Fields {
		if f.XMLName.Local == "CountDetails" {
			counts = map[string]string{}
			for _, c := range f.Inner {
				if c.XMLName.Space != nsCounts {
					t.Errorf("%s is in namespace %q", c.XMLName.Local, c.XMLName.Space)
				}
				counts[c.XMLName.Local] = c.Text
			}
		}
	}
	want := map[string]string{"ActiveMessageCount": "3", "DeadLetterMessageCount": "2", "ScheduledMessageCount": "1",
		"TransferMessageCount": "4", "TransferDeadLetterMessageCount": "0"}
	if !maps.Equal(want, counts) {
		t.Errorf("CountDetails %v, want %v", counts, want)
	}

	// The 2017-04 descriptions have no MaxMessageSizeInKilobytes.
	old := readEntryAnswer(t, s.do(http.MethodGet, "/orders?api-version=2017-04", "").Body.String())
	if _, ok := old.Content.Inner.field("MaxMessageSizeInKilobytes"); ok {
		t.Error("MaxMessageSizeInKilobytes in a 2017-04 answer")
	}
}

// GET and DELETE of /{name} find a topic as well as a queue; a name that
// is neither is 404.
func TestEntityPathsServeQueuesAndTopics(t *testing.T) {
	s := newServer(t)
	s.admin.topics["events"] = &raftbusv1.TopicProperties{Name: "events", PartitionCount: proto.Uint32(1)}
	s.admin.counts["events"] = &raftbusv1.RuntimeProperties{SubscriptionCount: 2}
	e := readEntryAnswer(t, s.do(http.MethodGet, "/events", "").Body.String())
	if e.Content.Inner.XMLName.Local != "TopicDescription" {
		t.Fatalf("GET /events answered a %s", e.Content.Inner.XMLName.Local)
	}
	if n, _ := e.Content.Inner.field("SubscriptionCount"); n != "2" {
		t.Errorf("SubscriptionCount %q", n)
	}
	if resp := s.do(http.MethodDelete, "/events", ""); resp.Code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", resp.Code, resp.Body)
	}
	if s.admin.topics["events"] != nil {
		t.Fatal("the topic is still there")
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		resp := s.do(method, "/events", "")
		if resp.Code != http.StatusNotFound || !strings.Contains(resp.Body.String(), "<Code>404</Code>") {
			t.Errorf("%s of a deleted topic: %d %s", method, resp.Code, resp.Body)
		}
	}
}

// A create of what exists is 409 and an update of what does not 404,
// with Service Bus's error body.
func TestConflictsAndMissingEntitiesHaveTheirStatuses(t *testing.T) {
	s := newServer(t)
	body := testdata(t, "python/create-queue-defaults.xml")
	if resp := s.do(http.MethodPut, "/q", body); resp.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.Code, resp.Body)
	}
	resp := s.do(http.MethodPut, "/q", body)
	if resp.Code != http.StatusConflict {
		t.Fatalf("second create: %d %s", resp.Code, resp.Body)
	}
	var e struct {
		Code   int
		Detail string
	}
	if err := xml.Unmarshal(resp.Body.Bytes(), &e); err != nil || e.Code != 409 || !strings.Contains(e.Detail, "TrackingId:") {
		t.Fatalf("error body %s (%v)", resp.Body, err)
	}
	if ct := resp.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/xml") {
		t.Errorf("error content type %q", ct)
	}
	if resp := s.do(http.MethodPut, "/nope", body, "If-Match", "*"); resp.Code != http.StatusNotFound {
		t.Fatalf("update of a missing queue: %d %s", resp.Code, resp.Body)
	}
	if resp := s.do(http.MethodGet, "/t/Subscriptions/nope", ""); resp.Code != http.StatusNotFound {
		t.Fatalf("missing subscription: %d %s", resp.Code, resp.Body)
	}
}

// Failures of the cluster keep their meaning: a busy cluster is 503 with
// Retry-After, which the SDKs retry.
func TestClusterFailuresMapToServiceBusStatuses(t *testing.T) {
	for reason, want := range map[raftbusv1.ErrorReason]int{
		raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY:      http.StatusServiceUnavailable,
		raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER:       http.StatusServiceUnavailable,
		raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:  http.StatusServiceUnavailable,
		raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT: http.StatusBadRequest,
		raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED:   http.StatusForbidden,
		raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED:     http.StatusUnauthorized,
		raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED:      http.StatusInternalServerError,
	} {
		s := newServer(t)
		s.admin.fail = func(string) error { return apierror.Errorf(reason, "failed so") }
		resp := s.do(http.MethodGet, "/$Resources/Queues", "")
		if resp.Code != want {
			t.Errorf("%v: %d, want %d", reason, resp.Code, want)
		}
		if want == http.StatusServiceUnavailable && resp.Header().Get("Retry-After") == "" {
			t.Errorf("%v: no Retry-After", reason)
		}
	}
}
