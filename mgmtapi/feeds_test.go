package mgmtapi

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// feed is what a test reads of a feed answer.
type feed struct {
	Links []struct {
		Rel  string `xml:"rel,attr"`
		Href string `xml:"href,attr"`
	} `xml:"http://www.w3.org/2005/Atom link"`
	Entries []atomEntry `xml:"http://www.w3.org/2005/Atom entry"`
}

func (f feed) titles() []string {
	var out []string
	for _, e := range f.Entries {
		out = append(out, e.Title)
	}
	return out
}

func (f feed) next() string {
	for _, l := range f.Links {
		if l.Rel == "next" {
			return l.Href
		}
	}
	return ""
}

// The lists page with $skip and $top; a next link says where the next
// page starts, with every parameter the SDKs read back from it.
func TestFeedsPageWithSkipAndTop(t *testing.T) {
	s := newServer(t)
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("q%d", i)
		s.admin.queues[name] = &raftbusv1.QueueProperties{Name: name, PartitionCount: proto.Uint32(1)}
	}
	read := func(path string) feed {
		t.Helper()
		resp := s.do(http.MethodGet, path, "")
		if resp.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.Code, resp.Body)
		}
		var f feed
		if err := xml.Unmarshal(resp.Body.Bytes(), &f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return f
	}
	f := read("/$Resources/queues?$skip=1&$top=2&api-version=2021-05")
	if got := strings.Join(f.titles(), ","); got != "q2,q3" {
		t.Fatalf("page %s", got)
	}
	next, err := url.Parse(f.next())
	if err != nil || next.Query().Get("$skip") != "3" || next.Query().Get("$top") != "2" || next.Query().Get("api-version") != "2021-05" {
		t.Fatalf("next link %q", f.next())
	}
	last := read(next.Path + "?" + next.RawQuery)
	if got := strings.Join(last.titles(), ","); got != "q4,q5" || last.next() != "" {
		t.Fatalf("last page %s, next %q", got, last.next())
	}
	if all := read("/$Resources/Queues"); len(all.Entries) != 5 || all.next() != "" {
		t.Fatalf("without $top: %v", all.titles())
	}
	if beyond := read("/$Resources/Queues?$skip=10"); len(beyond.Entries) != 0 {
		t.Fatalf("beyond the end: %v", beyond.titles())
	}
}

// A subscription's rules list as RuleDescriptions with their filters,
// actions and typed parameters.
func TestRulesListWithTheirFilters(t *testing.T) {
	s := newServer(t)
	s.admin.topics["t"] = &raftbusv1.TopicProperties{Name: "t"}
	s.admin.subs["t/s"] = &raftbusv1.SubscriptionProperties{TopicName: "t", SubscriptionName: "s"}
	sql := sqlRule("b", "n > @n", map[string]*raftbusv1.PropertyValue{"@n": i32(3)})
	sql.Action = &raftbusv1.SqlRuleAction{SqlExpression: "SET x = 1"}
	s.admin.rules["t/s"] = map[string]*raftbusv1.RuleProperties{"a": trueRule("a"), "b": sql}
	resp := s.do(http.MethodGet, "/t/Subscriptions/s/Rules", "")
	body := resp.Body.String()
	for _, want := range []string{
		`<title type="text">a</title>`, `<Filter i:type="TrueFilter"><SqlExpression>1=1</SqlExpression>`,
		`<Action i:type="EmptyRuleAction"/>`, `<Filter i:type="SqlFilter"><SqlExpression>n &gt; @n</SqlExpression>`,
		`<Key>@n</Key><Value i:type="d6p1:int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">3</Value>`,
		`<Action i:type="SqlRuleAction"><SqlExpression>SET x = 1</SqlExpression>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the rules feed has no %s:\n%s", want, body)
		}
	}
}

// tokens is a TokenChecker that grants one token, recording what it was
// asked.
type tokens struct {
	good  string
	asked []string
}

func (k *tokens) AuthorizeToken(token, path string, rights ...raftbusv1.AccessRight) error {
	k.asked = append(k.asked, path)
	if len(rights) != 1 || rights[0] != raftbusv1.AccessRight_ACCESS_RIGHT_MANAGE {
		return errors.New("not asked for Manage")
	}
	if token != k.good {
		return apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED, "bad token")
	}
	return nil
}

// With access policies every request needs a token granting Manage on
// its path; without one it is 401 and nothing is done.
func TestRequestsNeedATokenGrantingManage(t *testing.T) {
	s := newServer(t)
	k := &tokens{good: "SharedAccessSignature sr=x&sig=y&se=1&skn=root"}
	s.h = New(Config{Admin: s.admin, Tokens: k})
	body := testdata(t, "python/create-queue-defaults.xml")
	for _, token := range []string{"", "SharedAccessSignature sr=x&sig=bad&se=1&skn=root"} {
		resp := s.do(http.MethodPut, "/q?api-version=2021-05", body, "Authorization", token)
		if resp.Code != http.StatusUnauthorized {
			t.Fatalf("token %q: %d %s", token, resp.Code, resp.Body)
		}
	}
	if len(s.admin.writes) != 0 {
		t.Fatalf("refused requests changed %v", s.admin.writes)
	}
	if resp := s.do(http.MethodPut, "/q?api-version=2021-05", body, "Authorization", k.good); resp.Code != http.StatusCreated {
		t.Fatalf("good token: %d %s", resp.Code, resp.Body)
	}
	s.do(http.MethodGet, "/t/Subscriptions/s/Rules/r", "", "Authorization", k.good)
	if got := k.asked[len(k.asked)-1]; got != "t/Subscriptions/s/Rules/r" {
		t.Fatalf("asked about %q", got)
	}
}

// A request beyond those the handler serves at once is 429, which the
// SDKs retry.
func TestTooManyRequestsAtOnceAreRetryable(t *testing.T) {
	s := newServer(t)
	for range maxInFlight {
		s.h.inFlight <- struct{}{}
	}
	resp := s.do(http.MethodGet, "/$Resources/Queues", "")
	if resp.Code != http.StatusTooManyRequests || resp.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %v %s", resp.Code, resp.Header(), resp.Body)
	}
}

func TestNamespaceInfo(t *testing.T) {
	s := newServer(t)
	resp := s.do(http.MethodGet, "/$namespaceinfo?api-version=2021-05", "")
	e := readEntryAnswer(t, resp.Body.String())
	if d := e.Content.Inner; d.XMLName.Local != "NamespaceInfo" {
		t.Fatalf("%s", resp.Body)
	} else if name, _ := d.field("Name"); name != "localhost" {
		t.Fatalf("name %q", name)
	}
}
