package partition

import "github.com/hashicorp/raft"

// transportWrapper is what the partition's wrappers of a group's
// raft.Transport (watchedTransport, commitCap) embed: besides the
// interface it keeps what raft looks for on a transport (pre-vote,
// Close), which embedding raft.Transport alone would hide.
type transportWrapper struct {
	raft.Transport
	prevote raft.WithPreVote
}

// wrapTransport returns the wrapper base for t; ok is false for a
// transport without pre-vote, which is to be left as it is (raft would
// take a wrapper for one that has it).
func wrapTransport(t raft.Transport) (w transportWrapper, ok bool) {
	pv, ok := t.(raft.WithPreVote)
	return transportWrapper{Transport: t, prevote: pv}, ok
}

func (w transportWrapper) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return w.prevote.RequestPreVote(id, target, args, resp)
}

// Close closes the wrapped transport when it can be closed.
func (w transportWrapper) Close() error {
	if c, ok := w.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}
