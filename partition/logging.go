package partition

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// RaftLogger gives hashicorp/raft, which logs through hclog, a logger that
// writes into the node's slog logger, tagged with the Raft group. Raft is chatty at INFO (every
// election step, every snapshot); WARN and above are what an operator acts on.
func RaftLogger(l *slog.Logger, group string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:            "raft",
		Level:           hclog.Warn,
		Output:          &slogWriter{log: l.With("group", group)},
		DisableTime:     true,
		IncludeLocation: false,
	})
}

// slogWriter turns each line hclog writes into one slog record.
type slogWriter struct{ log *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		level := slog.LevelInfo
		switch {
		case firstElection(line), quietPeer(line), closing(line):
			level = slog.LevelDebug
		case bytes.HasPrefix(line, []byte("[ERROR]")):
			level = slog.LevelError
		case bytes.HasPrefix(line, []byte("[WARN]")):
			level = slog.LevelWarn
		}
		w.log.Log(context.Background(), level, string(line))
	}
	return len(p), nil
}

// firstElection tells the warning raft writes when a replica that has
// heard from no leader since it started calls an election: every group
// does that once when it is created or its node starts, so it is routine,
// not something to act on. A replica that lost its leader names it
// (last-leader-id=n2), and that stays a warning.
func firstElection(line []byte) bool {
	return bytes.HasPrefix(line, []byte("[WARN]")) &&
		bytes.Contains(line, []byte("heartbeat timeout reached, starting election")) &&
		bytes.HasSuffix(line, []byte("last-leader-id="))
}

// quietPeer tells the error raft writes when a heartbeat reaches a peer
// that has closed the group after it quiesced (see quiesce.go): the
// leader, about to close too, sends a few more. Routine.
func quietPeer(line []byte) bool {
	return bytes.Contains(line, []byte("failed to heartbeat to")) && bytes.Contains(line, []byte("is quiet on"))
}

// closing tells the errors raft writes for the RPCs a group's own close
// cut short (see StopGroup).
func closing(line []byte) bool {
	return bytes.Contains(line, []byte("failed to pipeline appendEntries")) && bytes.Contains(line, []byte("append pipeline closed")) ||
		bytes.Contains(line, []byte("failed to heartbeat to")) && bytes.HasSuffix(line, []byte("context canceled\""))
}
