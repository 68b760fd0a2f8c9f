package raftgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
)

// snapshotTimeout scales the RPC timeout with the snapshot's size, as raft's
// NetworkTransport does: one Timeout per snapshotTimeoutScale bytes, never
// less than one.
func snapshotTimeout(timeout time.Duration, size int64) time.Duration {
	if scaled := timeout * time.Duration(size/snapshotTimeoutScale); scaled > timeout {
		return scaled
	}
	return timeout
}

// InstallSnapshot streams a snapshot to target: its metadata first, then
// data in chunks read from data until EOF.
func (t *GroupTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	timeout := snapshotTimeout(t.mux.timeout, args.Size)
	err := t.call(id, target, timeout, func(ctx context.Context, c raftv1.RaftTransportServiceClient) error {
		stream, err := c.InstallSnapshot(ctx)
		if err != nil {
			return err
		}
		meta := &raftv1.InstallSnapshotRequest{Chunk: &raftv1.InstallSnapshotRequest_Meta{Meta: snapshotMetaToProto(t.group, args)}}
		if err := stream.Send(meta); err != nil {
			return streamError(stream, err)
		}
		if err := sendSnapshotData(stream, data); err != nil {
			return err
		}
		out, err := stream.CloseAndRecv()
		if err != nil {
			return err
		}
		*resp = installSnapshotResponseFromProto(out)
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftgrpc: install snapshot on %s (group %s): %w", target, t.group, err)
	}
	return nil
}

// sendSnapshotData sends data in chunks of snapshotChunkSize. Each chunk gets
// its own buffer: gRPC may still hold a message after Send returns.
func sendSnapshotData(stream grpc.ClientStreamingClient[raftv1.InstallSnapshotRequest, raftv1.InstallSnapshotResponse], data io.Reader) error {
	for {
		buf := make([]byte, snapshotChunkSize)
		n, readErr := io.ReadFull(data, buf)
		if n > 0 {
			chunk := &raftv1.InstallSnapshotRequest{Chunk: &raftv1.InstallSnapshotRequest_Data{Data: buf[:n]}}
			if err := stream.Send(chunk); err != nil {
				return streamError(stream, err)
			}
		}
		switch {
		case readErr == nil:
		case errors.Is(readErr, io.EOF), errors.Is(readErr, io.ErrUnexpectedEOF):
			return nil
		default:
			// Returning cancels the call, which tells the receiver.
			return fmt.Errorf("read snapshot: %w", readErr)
		}
	}
}

// streamError returns the real error of a client stream whose Send failed:
// gRPC reports io.EOF from Send and the status from the receiving side.
func streamError(stream grpc.ClientStreamingClient[raftv1.InstallSnapshotRequest, raftv1.InstallSnapshotResponse], err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		return err
	}
	return fmt.Errorf("%w: stream ended before the snapshot was sent", errUnexpectedMessage)
}

// errSnapshotAnswered stops feeding a snapshot raft has already answered.
var errSnapshotAnswered = errors.New("raftgrpc: snapshot already answered")

// InstallSnapshot hands the snapshot to raft with an io.Pipe as its Reader
// and feeds the pipe from the stream as raft reads, so the snapshot is never
// held in memory whole. raft may answer before reading everything (when it
// fails), so a second goroutine waits for the answer and closes the pipe to
// release the feeder.
func (s *transportServer) InstallSnapshot(stream grpc.ClientStreamingServer[raftv1.InstallSnapshotRequest, raftv1.InstallSnapshotResponse]) error {
	ctx := stream.Context()
	if err := s.admit(ctx); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	meta := first.GetMeta()
	if meta == nil {
		return status.Error(codes.InvalidArgument, "install snapshot: the first message must carry the snapshot's metadata")
	}
	t, err := s.groupTransport(stream.Context(), meta.GetGroup(), false, true)
	if err != nil {
		return err
	}

	reader, writer := io.Pipe()
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: snapshotMetaFromProto(meta), Reader: reader, RespChan: respCh}
	if err := t.deliver(ctx, rpc, false); err != nil {
		return toStatus(err)
	}

	type result struct {
		resp any
		err  error
	}
	answered := make(chan result, 1)
	go func() {
		resp, err := t.await(ctx, respCh)
		reader.CloseWithError(errSnapshotAnswered)
		answered <- result{resp, err}
	}()

	feedSnapshot(stream, writer)
	res := <-answered
	if res.err != nil {
		return toStatus(res.err)
	}
	out, err := responseAs[*raft.InstallSnapshotResponse](res.resp)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return stream.SendAndClose(installSnapshotResponseToProto(out))
}

// feedSnapshot copies the data messages of stream into w until the stream
// ends (w is closed: raft reads EOF) or fails (raft reads the error).
func feedSnapshot(stream grpc.ClientStreamingServer[raftv1.InstallSnapshotRequest, raftv1.InstallSnapshotResponse], w *io.PipeWriter) {
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			w.Close()
			return
		}
		if err != nil {
			w.CloseWithError(fmt.Errorf("raftgrpc: receive snapshot: %w", err))
			return
		}
		data, ok := msg.GetChunk().(*raftv1.InstallSnapshotRequest_Data)
		if !ok {
			w.CloseWithError(fmt.Errorf("raftgrpc: receive snapshot: %w: metadata after data", errUnexpectedMessage))
			return
		}
		if _, err := w.Write(data.Data); err != nil {
			// raft answered or stopped reading; the answer says why.
			return
		}
	}
}
