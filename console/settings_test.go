package console

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestSettingsShowAutoDeleteOnIdleWhenSet(t *testing.T) {
	never := durationpb.New(math.MaxInt64)
	if s := settingsOf(&raftbusv1.QueueProperties{AutoDeleteOnIdle: never}); strings.Contains(s, "idle") {
		t.Fatalf("a queue never deleted: %q", s)
	}
	if s := settingsOf(&raftbusv1.SubscriptionProperties{AutoDeleteOnIdle: durationpb.New(10 * time.Minute)}); !strings.Contains(s, "deleted after 10m0s idle") {
		t.Fatalf("a subscription deleted after 10 minutes idle: %q", s)
	}
}
