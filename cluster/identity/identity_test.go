package identity

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestClaimDrawsAnIncarnationPerDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	rec, created, err := Claim(dir, "n1")
	if err != nil || !created {
		t.Fatalf("first claim: %+v created %v err %v", rec, created, err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(rec.Incarnation) {
		t.Fatalf("incarnation %q is not a UUIDv4", rec.Incarnation)
	}
	again, created, err := Claim(dir, "n1")
	if err != nil || created || again != rec {
		t.Fatalf("second claim: %+v created %v err %v, want %+v", again, created, err, rec)
	}
	if _, _, err := Claim(dir, "n2"); err == nil || !strings.Contains(err.Error(), `belongs to node "n1"`) {
		t.Fatalf("claim by another node: %v", err)
	}

	// Wiped and created again: a new incarnation.
	os.RemoveAll(dir)
	wiped, created, err := Claim(dir, "n1")
	if err != nil || !created || wiped.Incarnation == rec.Incarnation {
		t.Fatalf("claim of a wiped dir: %+v created %v err %v; want a new incarnation", wiped, created, err)
	}
}

func TestClaimGivesAnOlderRecordAnIncarnationAndKeepsIt(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "node.json"), []byte(`{"node_id":"n1"}`), 0o640)
	rec, created, err := Claim(dir, "n1")
	if err != nil || created || rec.Incarnation == "" {
		t.Fatalf("claim of an older record: %+v created %v err %v", rec, created, err)
	}
	again, _, err := Claim(dir, "n1")
	if err != nil || again.Incarnation != rec.Incarnation {
		t.Fatalf("the upgraded record was not kept: %+v then %+v (%v)", rec, again, err)
	}
	rec.ClusterID = "c1"
	if err := Save(dir, rec); err != nil {
		t.Fatal(err)
	}
	if again, _, _ := Claim(dir, "n1"); again != rec {
		t.Fatalf("after saving the cluster id: %+v, want %+v", again, rec)
	}
}

func TestCheckRefusesForeignAndStaleNodes(t *testing.T) {
	self := Identity{ClusterID: "c1", NodeID: "n1", Incarnation: "i1"}
	cases := []struct {
		name       string
		caller     Identity
		recorded   string
		target     string
		targetNode string
		want       Kind
	}{
		{"a known member", Identity{"c1", "n2", "i2"}, "i2", "i1", "", 0},
		{"a member still forming its cluster", Identity{"", "n2", "i2"}, "", "", "", 0},
		{"a node that predates identities", Identity{}, "i2", "", "", 0},
		{"a member whose incarnation is not recorded yet", Identity{"c1", "n2", "i2"}, "", "i1", "", 0},
		{"another cluster", Identity{"c2", "n2", "i2"}, "i2", "i1", "", ForeignCluster},
		{"a wiped caller", Identity{"", "n2", "i9"}, "i2", "", "", StaleCaller},
		{"a call meant for the incarnation before this one", Identity{"c1", "n2", "i2"}, "i2", "i0", "", StaleSelf},
		{"a call meant for this node", Identity{"c1", "n2", "i2"}, "i2", "i1", "n1", 0},
		{"a call meant for the node this address had before", Identity{"c1", "n2", "i2"}, "i2", "i7", "n7", WrongNode},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(self, tc.caller, tc.recorded, Identity{NodeID: tc.targetNode, Incarnation: tc.target})
			switch {
			case tc.want == 0 && r != nil:
				t.Fatalf("refused: %v", r)
			case tc.want != 0 && (r == nil || r.Kind != tc.want):
				t.Fatalf("got %v, want refusal kind %d", r, tc.want)
			}
		})
	}
	r := Check(self, Identity{"c1", "n2", "i9"}, "i2", Identity{})
	for _, want := range []string{"n2", "wiped", "remove node n2 and join under a new id, or restore its data dir"} {
		if !strings.Contains(r.Error(), want) {
			t.Fatalf("%q does not say %q", r.Error(), want)
		}
	}
}

func TestMetadataCarriesTheIdentity(t *testing.T) {
	self := Identity{ClusterID: "c1", NodeID: "n1", Incarnation: "i1"}
	caller, target := Caller(Outgoing(self, Identity{NodeID: "n2", Incarnation: "i2"}))
	if caller != self || target != (Identity{NodeID: "n2", Incarnation: "i2"}) {
		t.Fatalf("round trip: %+v %q", caller, target)
	}
	if caller, target := Caller(Outgoing(Identity{NodeID: "n1"}, Identity{})); caller != (Identity{NodeID: "n1"}) || target != (Identity{}) {
		t.Fatalf("partial identity: %+v %q", caller, target)
	}
}
