package raftgrpc

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
)

// Conversions between the structs of hashicorp/raft and their wire messages,
// field by field.
//
// The deprecated address fields of raft's structs (AppendEntriesRequest.Leader,
// RequestVoteRequest.Candidate, InstallSnapshotRequest.Leader) are not on the
// wire: since protocol version 3 raft reads the sender's address from
// RPCHeader.Addr and fills the deprecated field with the very same bytes
// (EncodePeer of its own address), so the receiver rebuilds them from the
// header. The pre-version-2 peer lists (RequestVoteResponse.Peers,
// InstallSnapshotRequest.Peers) are only read by raft for protocol versions
// and snapshot versions it no longer produces, and are dropped.

func headerToProto(h raft.RPCHeader) *raftv1.RPCHeader {
	return &raftv1.RPCHeader{
		ProtocolVersion: int64(h.ProtocolVersion),
		Id:              h.ID,
		Addr:            h.Addr,
	}
}

func headerFromProto(h *raftv1.RPCHeader) raft.RPCHeader {
	return raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersion(h.GetProtocolVersion()),
		ID:              h.GetId(),
		Addr:            h.GetAddr(),
	}
}

// logTypeToProto and logTypeFromProto rely on the proto enum numbering
// raft.LogType one to one (checked by TestLogTypeNumbering).
func logTypeToProto(t raft.LogType) raftv1.LogType { return raftv1.LogType(t) }

func logTypeFromProto(t raftv1.LogType) raft.LogType { return raft.LogType(t) }

func logToProto(l *raft.Log) *raftv1.Log {
	var appendedAt int64
	if !l.AppendedAt.IsZero() {
		appendedAt = l.AppendedAt.UnixNano()
	}
	return &raftv1.Log{
		Index:              l.Index,
		Term:               l.Term,
		Type:               logTypeToProto(l.Type),
		Data:               l.Data,
		Extensions:         l.Extensions,
		AppendedAtUnixNano: appendedAt,
	}
}

func logFromProto(l *raftv1.Log) *raft.Log {
	var appendedAt time.Time
	if n := l.GetAppendedAtUnixNano(); n != 0 {
		appendedAt = time.Unix(0, n)
	}
	return &raft.Log{
		Index:      l.GetIndex(),
		Term:       l.GetTerm(),
		Type:       logTypeFromProto(l.GetType()),
		Data:       l.GetData(),
		Extensions: l.GetExtensions(),
		AppendedAt: appendedAt,
	}
}

func appendEntriesRequestToProto(group string, r *raft.AppendEntriesRequest) *raftv1.AppendEntriesRequest {
	var entries []*raftv1.Log
	if len(r.Entries) > 0 {
		entries = make([]*raftv1.Log, len(r.Entries))
		for i, l := range r.Entries {
			entries[i] = logToProto(l)
		}
	}
	return &raftv1.AppendEntriesRequest{
		Group:             group,
		Header:            headerToProto(r.RPCHeader),
		Term:              r.Term,
		PrevLogEntry:      r.PrevLogEntry,
		PrevLogTerm:       r.PrevLogTerm,
		Entries:           entries,
		LeaderCommitIndex: r.LeaderCommitIndex,
	}
}

func appendEntriesRequestFromProto(r *raftv1.AppendEntriesRequest) *raft.AppendEntriesRequest {
	var entries []*raft.Log
	if len(r.GetEntries()) > 0 {
		entries = make([]*raft.Log, len(r.GetEntries()))
		for i, l := range r.GetEntries() {
			entries[i] = logFromProto(l)
		}
	}
	header := headerFromProto(r.GetHeader())
	return &raft.AppendEntriesRequest{
		RPCHeader:         header,
		Term:              r.GetTerm(),
		Leader:            header.Addr,
		PrevLogEntry:      r.GetPrevLogEntry(),
		PrevLogTerm:       r.GetPrevLogTerm(),
		Entries:           entries,
		LeaderCommitIndex: r.GetLeaderCommitIndex(),
	}
}

func appendEntriesResponseToProto(r *raft.AppendEntriesResponse) *raftv1.AppendEntriesResponse {
	return &raftv1.AppendEntriesResponse{
		Header:         headerToProto(r.RPCHeader),
		Term:           r.Term,
		LastLog:        r.LastLog,
		Success:        r.Success,
		NoRetryBackoff: r.NoRetryBackoff,
	}
}

func appendEntriesResponseFromProto(r *raftv1.AppendEntriesResponse) raft.AppendEntriesResponse {
	return raft.AppendEntriesResponse{
		RPCHeader:      headerFromProto(r.GetHeader()),
		Term:           r.GetTerm(),
		LastLog:        r.GetLastLog(),
		Success:        r.GetSuccess(),
		NoRetryBackoff: r.GetNoRetryBackoff(),
	}
}

func requestVoteRequestToProto(group string, r *raft.RequestVoteRequest) *raftv1.RequestVoteRequest {
	return &raftv1.RequestVoteRequest{
		Group:              group,
		Header:             headerToProto(r.RPCHeader),
		Term:               r.Term,
		LastLogIndex:       r.LastLogIndex,
		LastLogTerm:        r.LastLogTerm,
		LeadershipTransfer: r.LeadershipTransfer,
	}
}

func requestVoteRequestFromProto(r *raftv1.RequestVoteRequest) *raft.RequestVoteRequest {
	header := headerFromProto(r.GetHeader())
	return &raft.RequestVoteRequest{
		RPCHeader:          header,
		Term:               r.GetTerm(),
		Candidate:          header.Addr,
		LastLogIndex:       r.GetLastLogIndex(),
		LastLogTerm:        r.GetLastLogTerm(),
		LeadershipTransfer: r.GetLeadershipTransfer(),
	}
}

func requestVoteResponseToProto(r *raft.RequestVoteResponse) *raftv1.RequestVoteResponse {
	return &raftv1.RequestVoteResponse{
		Header:  headerToProto(r.RPCHeader),
		Term:    r.Term,
		Granted: r.Granted,
	}
}

func requestVoteResponseFromProto(r *raftv1.RequestVoteResponse) raft.RequestVoteResponse {
	return raft.RequestVoteResponse{
		RPCHeader: headerFromProto(r.GetHeader()),
		Term:      r.GetTerm(),
		Granted:   r.GetGranted(),
	}
}

func requestPreVoteRequestToProto(group string, r *raft.RequestPreVoteRequest) *raftv1.RequestPreVoteRequest {
	return &raftv1.RequestPreVoteRequest{
		Group:        group,
		Header:       headerToProto(r.RPCHeader),
		Term:         r.Term,
		LastLogIndex: r.LastLogIndex,
		LastLogTerm:  r.LastLogTerm,
	}
}

func requestPreVoteRequestFromProto(r *raftv1.RequestPreVoteRequest) *raft.RequestPreVoteRequest {
	return &raft.RequestPreVoteRequest{
		RPCHeader:    headerFromProto(r.GetHeader()),
		Term:         r.GetTerm(),
		LastLogIndex: r.GetLastLogIndex(),
		LastLogTerm:  r.GetLastLogTerm(),
	}
}

func requestPreVoteResponseToProto(r *raft.RequestPreVoteResponse) *raftv1.RequestPreVoteResponse {
	return &raftv1.RequestPreVoteResponse{
		Header:  headerToProto(r.RPCHeader),
		Term:    r.Term,
		Granted: r.Granted,
	}
}

func requestPreVoteResponseFromProto(r *raftv1.RequestPreVoteResponse) raft.RequestPreVoteResponse {
	return raft.RequestPreVoteResponse{
		RPCHeader: headerFromProto(r.GetHeader()),
		Term:      r.GetTerm(),
		Granted:   r.GetGranted(),
	}
}

func timeoutNowRequestToProto(group string, r *raft.TimeoutNowRequest) *raftv1.TimeoutNowRequest {
	return &raftv1.TimeoutNowRequest{Group: group, Header: headerToProto(r.RPCHeader)}
}

func timeoutNowRequestFromProto(r *raftv1.TimeoutNowRequest) *raft.TimeoutNowRequest {
	return &raft.TimeoutNowRequest{RPCHeader: headerFromProto(r.GetHeader())}
}

func timeoutNowResponseToProto(r *raft.TimeoutNowResponse) *raftv1.TimeoutNowResponse {
	return &raftv1.TimeoutNowResponse{Header: headerToProto(r.RPCHeader)}
}

func timeoutNowResponseFromProto(r *raftv1.TimeoutNowResponse) raft.TimeoutNowResponse {
	return raft.TimeoutNowResponse{RPCHeader: headerFromProto(r.GetHeader())}
}

func snapshotMetaToProto(group string, r *raft.InstallSnapshotRequest) *raftv1.SnapshotMeta {
	return &raftv1.SnapshotMeta{
		Group:              group,
		Header:             headerToProto(r.RPCHeader),
		SnapshotVersion:    int64(r.SnapshotVersion),
		Term:               r.Term,
		LastLogIndex:       r.LastLogIndex,
		LastLogTerm:        r.LastLogTerm,
		Configuration:      r.Configuration,
		ConfigurationIndex: r.ConfigurationIndex,
		Size:               r.Size,
	}
}

func snapshotMetaFromProto(r *raftv1.SnapshotMeta) *raft.InstallSnapshotRequest {
	header := headerFromProto(r.GetHeader())
	return &raft.InstallSnapshotRequest{
		RPCHeader:          header,
		SnapshotVersion:    raft.SnapshotVersion(r.GetSnapshotVersion()),
		Term:               r.GetTerm(),
		Leader:             header.Addr,
		LastLogIndex:       r.GetLastLogIndex(),
		LastLogTerm:        r.GetLastLogTerm(),
		Configuration:      r.GetConfiguration(),
		ConfigurationIndex: r.GetConfigurationIndex(),
		Size:               r.GetSize(),
	}
}

func installSnapshotResponseToProto(r *raft.InstallSnapshotResponse) *raftv1.InstallSnapshotResponse {
	return &raftv1.InstallSnapshotResponse{
		Header:  headerToProto(r.RPCHeader),
		Term:    r.Term,
		Success: r.Success,
	}
}

func installSnapshotResponseFromProto(r *raftv1.InstallSnapshotResponse) raft.InstallSnapshotResponse {
	return raft.InstallSnapshotResponse{
		RPCHeader: headerFromProto(r.GetHeader()),
		Term:      r.GetTerm(),
		Success:   r.GetSuccess(),
	}
}

// responseAs casts the response a raft handler put on an RPC's RespChan to
// the type the request calls for. A mismatch is a bug in the handler, reported
// as an error rather than a panic on the gRPC server.
func responseAs[T any](resp any) (T, error) {
	out, ok := resp.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("handler answered with %T, want %T", resp, zero)
	}
	return out, nil
}
