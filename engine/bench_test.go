package engine

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"testing"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const benchBatch = 100

func benchMessages(n, bodySize int) []*raftbusv1.Message {
	body := make([]byte, bodySize)
	msgs := make([]*raftbusv1.Message, n)
	for i := range msgs {
		msgs[i] = &raftbusv1.Message{MessageId: fmt.Sprintf("%08x-4a7c-4f5e-9e37-79b97f4a7c15", i), Body: body}
	}
	return msgs
}

// BenchmarkSendLockComplete measures one message through send, PeekLock
// and complete, with 1 KiB bodies in batches of 100 (one Send and one Lock
// command per batch, one Settle per message).
func BenchmarkSendLockComplete(b *testing.B) {
	e := New(0, 1)
	now := startMs
	e.Apply(&enginev1.Command{NowUnixMs: now, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testQueue}}})
	send := &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: testQueue, Messages: benchMessages(benchBatch, 1024)}}}
	lock := &enginev1.Command{TokenSeed: make([]byte, 16), Body: &enginev1.Command_Lock{Lock: &enginev1.Lock{EntityPath: testQueue, MaxMessages: benchBatch}}}
	settle := &enginev1.Settle{EntityPath: testQueue, Disposition: enginev1.Disposition_DISPOSITION_COMPLETE}
	complete := &enginev1.Command{Body: &enginev1.Command_Settle{Settle: settle}}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += benchBatch {
		now++
		send.NowUnixMs, lock.NowUnixMs, complete.NowUnixMs = now, now, now
		lock.TokenSeed[0], lock.TokenSeed[1] = byte(n), byte(n>>8)
		if r := e.Apply(send); r.GetError() != nil {
			b.Fatal(r.GetError())
		}
		got := e.Apply(lock).GetLock().GetMessages()
		if len(got) != benchBatch {
			b.Fatalf("locked %d", len(got))
		}
		for _, m := range got {
			settle.LockToken = m.GetLockToken()
			if r := e.Apply(complete); r.GetError() != nil {
				b.Fatal(r.GetError())
			}
		}
	}
	b.StopTimer()
	msgs := float64((b.N + benchBatch - 1) / benchBatch * benchBatch)
	b.ReportMetric(msgs/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkReceiveWithReceiveID measures what receipts cost: one message
// through send and receive (PeekLock, then complete; or ReceiveAndDelete),
// 1 KiB bodies in batches of 100, with and without a receive id.
func BenchmarkReceiveWithReceiveID(b *testing.B) {
	for _, mode := range []raftbusv1.ReceiveMode{peekLock, receiveDel} {
		for _, withID := range []bool{false, true} {
			b.Run(fmt.Sprintf("mode=%s/receive_id=%v", mode, withID), func(b *testing.B) {
				e := New(0, 1)
				now := startMs
				e.Apply(&enginev1.Command{NowUnixMs: now, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testQueue}}})
				send := &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: testQueue, Messages: benchMessages(benchBatch, 1024)}}}
				l := &enginev1.Lock{EntityPath: testQueue, MaxMessages: benchBatch, ReceiveMode: mode}
				lock := &enginev1.Command{TokenSeed: make([]byte, 16), Body: &enginev1.Command_Lock{Lock: l}}
				settle := &enginev1.Settle{EntityPath: testQueue, Disposition: enginev1.Disposition_DISPOSITION_COMPLETE}
				complete := &enginev1.Command{Body: &enginev1.Command_Settle{Settle: settle}}
				b.ReportAllocs()
				b.ResetTimer()
				for n := 0; n < b.N; n += benchBatch {
					now++
					send.NowUnixMs, lock.NowUnixMs, complete.NowUnixMs = now, now, now
					binary.BigEndian.PutUint64(lock.TokenSeed, uint64(n))
					if withID {
						l.ReceiveId = binary.BigEndian.AppendUint64(l.ReceiveId[:0], uint64(n))
					}
					if r := e.Apply(send); r.GetError() != nil {
						b.Fatal(r.GetError())
					}
					got := e.Apply(lock).GetLock().GetMessages()
					if len(got) != benchBatch {
						b.Fatalf("received %d", len(got))
					}
					if mode == receiveDel {
						continue
					}
					for _, m := range got {
						settle.LockToken = m.GetLockToken()
						if r := e.Apply(complete); r.GetError() != nil {
							b.Fatal(r.GetError())
						}
					}
				}
				b.StopTimer()
				msgs := float64((b.N + benchBatch - 1) / benchBatch * benchBatch)
				b.ReportMetric(msgs/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// BenchmarkStoredMessageMemory measures the heap held per stored message
// beyond its body (bodies are shared, ids are 36 characters).
func BenchmarkStoredMessageMemory(b *testing.B) {
	for _, dup := range []bool{false, true} {
		b.Run(fmt.Sprintf("duplicate_detection=%v", dup), func(b *testing.B) {
			const n = 100_000
			var perMessage float64
			for range b.N {
				perMessage = storedBytesPerMessage(b, n, dup)
			}
			b.ReportMetric(perMessage, "bytes/msg")
		})
	}
}

// storedBytesPerMessage sends n messages (the commands and results are
// dropped) and returns the growth of the live heap per message.
func storedBytesPerMessage(tb testing.TB, n int, duplicateDetection bool) float64 {
	e := New(0, 1)
	props := &raftbusv1.QueueProperties{RequiresDuplicateDetection: &duplicateDetection}
	e.Apply(&enginev1.Command{NowUnixMs: startMs, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testQueue, Properties: props}}})
	body := make([]byte, 1024)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i += benchBatch {
		msgs := make([]*raftbusv1.Message, benchBatch)
		for j := range msgs {
			msgs[j] = &raftbusv1.Message{MessageId: fmt.Sprintf("%08x-4a7c-4f5e-9e37-79b97f4a7c15", i+j), Body: body}
		}
		if r := e.Apply(&enginev1.Command{NowUnixMs: startMs, Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: testQueue, Messages: msgs}}}); r.GetError() != nil {
			tb.Fatal(r.GetError())
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(e)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// benchTopic configures a topic with ten subscriptions: five take every
// message ($Default), five have SQL filters that each match half of the
// messages benchTopicMessages makes.
func benchTopic(e *Engine) []*enginev1.Command {
	e.Apply(&enginev1.Command{NowUnixMs: startMs, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: testTopic, Topic: &raftbusv1.TopicProperties{}, MaxSizeBytes: 1 << 40,
	}}})
	filters := []string{
		"color = 'red'",
		"n % 2 = 0",
		"sys.Label = 'order.created'",
		"region IN ('eu', 'us') AND n % 2 = 1",
		"sys.MessageId LIKE '%0' OR sys.MessageId LIKE '%2' OR sys.MessageId LIKE '%4' OR sys.MessageId LIKE '%6' OR sys.MessageId LIKE '%8'",
	}
	var subs []*enginev1.Command
	for i := range 10 {
		c := &enginev1.ConfigureEntity{EntityPath: subPath(fmt.Sprintf("s%d", i)), Subscription: &raftbusv1.SubscriptionProperties{}}
		if i < len(filters) {
			c.Rules = []*raftbusv1.RuleProperties{sqlRule("half", filters[i])}
		}
		cmd := &enginev1.Command{NowUnixMs: startMs, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: c}}
		if r := e.Apply(cmd); r.GetError() != nil {
			panic(r.GetError())
		}
		subs = append(subs, cmd)
	}
	return subs
}

// benchTopicMessages are n messages with 1 KiB bodies; every filter of
// benchTopic matches every other one.
func benchTopicMessages(n int) []*raftbusv1.Message {
	msgs := benchMessages(n, 1024)
	for i, m := range msgs {
		m.MessageId = fmt.Sprintf("%08x-4a7c-4f5e-9e37-79b97f4a7c1%d", i, i%10)
		color, region, subject := "red", "eu", "order.created"
		if i%2 == 1 {
			color, region, subject = "blue", "us", "order.updated"
		}
		m.Subject = subject
		m.ApplicationProperties = map[string]*raftbusv1.PropertyValue{
			"color":  {Value: &raftbusv1.PropertyValue_StringValue{StringValue: color}},
			"region": {Value: &raftbusv1.PropertyValue_StringValue{StringValue: region}},
			"n":      {Value: &raftbusv1.PropertyValue_IntValue{IntValue: int64(i)}},
		}
	}
	return msgs
}

// BenchmarkTopicPublish measures messages published to a topic with ten
// subscriptions, five of them with SQL filters matching half the messages
// (7.5 copies per message), in batches of 100. The subscriptions are
// drained outside the timed part.
func BenchmarkTopicPublish(b *testing.B) {
	e := New(0, 1)
	subs := benchTopic(e)
	send := &enginev1.Command{NowUnixMs: startMs, Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: testTopic, Messages: benchTopicMessages(benchBatch)}}}
	// Emptying the subscriptions: delete and create them again.
	drain := func() {
		for _, s := range subs {
			e.Apply(deleteCmd(s.GetConfigureEntity().GetEntityPath()))
			e.Apply(s)
		}
	}
	e.Apply(send)
	for i, s := range subs {
		want := int64(benchBatch)
		if i < 5 {
			want /= 2
		}
		if got := e.entities[s.GetConfigureEntity().GetEntityPath()].main.count(); got != want {
			b.Fatalf("subscription %d took %d of %d messages, want %d", i, got, benchBatch, want)
		}
	}
	drain()
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += benchBatch {
		if r := e.Apply(send); r.GetError() != nil {
			b.Fatal(r.GetError())
		}
		if n%(50*benchBatch) == 0 {
			b.StopTimer()
			drain()
			b.StartTimer()
		}
	}
	b.StopTimer()
	msgs := float64((b.N + benchBatch - 1) / benchBatch * benchBatch)
	b.ReportMetric(msgs/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkSessionAcceptReceiveComplete measures one message through a
// session: 1,000 sessions of 10 messages (1 KiB bodies) are sent in
// batches of 100, then each session is accepted as the next available,
// its messages received one at a time and completed, and it is released.
func BenchmarkSessionAcceptReceiveComplete(b *testing.B) {
	const sessions, perSession = 1000, 10
	e := New(0, 1)
	now := startMs
	e.Apply(&enginev1.Command{NowUnixMs: now, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: testQueue, Properties: &raftbusv1.QueueProperties{RequiresSession: ptr(true)},
	}}})
	var sends []*enginev1.Command
	msgs := benchMessages(sessions*perSession, 1024)
	for i, m := range msgs {
		m.SessionId = fmt.Sprintf("session-%04d", i%sessions)
	}
	for i := 0; i < len(msgs); i += benchBatch {
		sends = append(sends, &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: testQueue, Messages: msgs[i : i+benchBatch]}}})
	}
	seed := make([]byte, 16)
	accept := &enginev1.Command{TokenSeed: seed, Body: &enginev1.Command_AcceptSession{AcceptSession: &enginev1.AcceptSession{EntityPath: testQueue}}}
	lock := &enginev1.Lock{EntityPath: testQueue, MaxMessages: 1}
	receive := &enginev1.Command{TokenSeed: seed, Body: &enginev1.Command_Lock{Lock: lock}}
	settle := &enginev1.Settle{EntityPath: testQueue, Disposition: enginev1.Disposition_DISPOSITION_COMPLETE}
	complete := &enginev1.Command{Body: &enginev1.Command_Settle{Settle: settle}}
	release := &enginev1.ReleaseSession{EntityPath: testQueue}
	closeSession := &enginev1.Command{Body: &enginev1.Command_ReleaseSession{ReleaseSession: release}}
	apply := func(cmd *enginev1.Command) *enginev1.Result {
		cmd.NowUnixMs = now
		r := e.Apply(cmd)
		if r.GetError() != nil {
			b.Fatal(r.GetError())
		}
		return r
	}
	var tokens uint64
	nextSeed := func() {
		tokens++
		binary.BigEndian.PutUint64(seed[8:], tokens)
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		now++
		for _, s := range sends {
			apply(s)
		}
		for range sessions {
			nextSeed()
			a := apply(accept).GetAcceptSession()
			if a.GetSessionId() == "" {
				b.Fatal("no session available")
			}
			lock.SessionId, lock.SessionLockToken = a.GetSessionId(), a.GetLockToken()
			for range perSession {
				nextSeed()
				got := apply(receive).GetLock().GetMessages()
				if len(got) != 1 {
					b.Fatalf("received %d", len(got))
				}
				settle.LockToken = got[0].GetLockToken()
				apply(complete)
			}
			release.SessionId, release.LockToken = a.GetSessionId(), a.GetLockToken()
			apply(closeSession)
		}
		done += sessions * perSession
	}
	b.StopTimer()
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkSnapshotOfABacklog measures what a snapshot of 100,000 queued
// 1 KiB messages costs: capture is what a replica's applies wait for,
// encode what it does afterwards, alongside them.
func BenchmarkSnapshotOfABacklog(b *testing.B) {
	const n = 100_000
	e := New(0, 1)
	e.Apply(&enginev1.Command{NowUnixMs: startMs, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testQueue}}})
	for i := 0; i < n; i += benchBatch {
		msgs := benchMessages(benchBatch, 1024)
		for j, m := range msgs {
			m.MessageId = fmt.Sprintf("%08x-4a7c-4f5e-9e37-79b97f4a7c15", i+j)
		}
		if r := e.Apply(&enginev1.Command{NowUnixMs: startMs, Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: testQueue, Messages: msgs}}}); r.GetError() != nil {
			b.Fatal(r.GetError())
		}
	}
	b.Run("capture", func(b *testing.B) {
		for range b.N {
			e.Capture()
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/snapshot")
	})
	b.Run("encode", func(b *testing.B) {
		im := e.Capture()
		b.ResetTimer()
		for range b.N {
			if err := im.Encode(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/snapshot")
	})
}
