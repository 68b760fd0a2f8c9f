package engine

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// fuzzEngine is an engine with entities, messages and locks to hit.
func fuzzEngine() *Engine {
	e := New(0, 1)
	for _, cmd := range workloadSetup() {
		e.Apply(cmd)
	}
	w := newWorkload(1)
	for range 60 {
		cmd := w.next()
		e.Apply(cmd)
	}
	return e
}

// FuzzApply feeds arbitrary bytes to command decoding and applies what
// decodes as a log entry: Apply must never panic, a malformed command must
// change nothing, every index must stay consistent, and the state must
// survive a snapshot round trip.
func FuzzApply(f *testing.F) {
	w := newWorkload(7)
	for range 40 {
		b, err := proto.Marshal(&enginev1.Entry{Commands: []*enginev1.Command{w.next(), w.next()}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for range 8 {
		topic := &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: workloadTopic, Messages: []*raftbusv1.Message{w.message()}}}}
		rules := &enginev1.Command{}
		w.ruleChange(rules)
		lock := &enginev1.Command{TokenSeed: make([]byte, 16), Body: &enginev1.Command_Lock{Lock: &enginev1.Lock{EntityPath: workloadSubscriptions[1+w.rng.IntN(3)], MaxMessages: 3}}}
		b, err := proto.Marshal(&enginev1.Entry{Commands: []*enginev1.Command{rules, topic, lock}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, mode := range []raftbusv1.ReceiveMode{peekLock, receiveDel} {
		// A receive, its repeat, a replay fencing another and that other.
		lock := func(id string, replay bool) *enginev1.Command {
			return &enginev1.Command{TokenSeed: make([]byte, 16), Body: &enginev1.Command_Lock{Lock: &enginev1.Lock{
				EntityPath: workloadEntities[0], ReceiveMode: mode, MaxMessages: 2, ReceiveId: []byte(id), Replay: replay}}}
		}
		send := &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: workloadEntities[0], Messages: []*raftbusv1.Message{w.message(), w.message()}}}}
		b, err := proto.Marshal(&enginev1.Entry{Commands: []*enginev1.Command{send, lock("f", false), lock("f", false), lock("g", true), lock("g", false)}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	one, _ := proto.Marshal(w.next())
	f.Add(one)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x52, 0x00}) // an entry with a command whose body is an empty Send
	f.Add([]byte{0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		e := fuzzEngine()
		if cmd, err := DecodeCommand(data); err == nil {
			e.Apply(cmd)
			checkInvariants(t, e)
		}
		var entry enginev1.Entry
		if proto.Unmarshal(data, &entry) != nil {
			return
		}
		for i, cmd := range entry.GetCommands() {
			if i == 16 {
				break
			}
			malformed := validate(cmd) != nil
			var before [32]byte
			if malformed {
				before = e.Digest()
			}
			res := e.Apply(cmd)
			if res.GetResult() == nil {
				t.Fatalf("command %d: empty result", i)
			}
			if malformed && e.Digest() != before {
				t.Fatalf("command %d: a malformed command changed the state: %v", i, res)
			}
			checkInvariants(t, e)
		}
		var buf bytes.Buffer
		if err := e.Snapshot(&buf); err != nil {
			t.Fatal(err)
		}
		restored := New(0, 1)
		if err := restored.Restore(&buf); err != nil {
			t.Fatal(err)
		}
		if restored.Digest() != e.Digest() {
			t.Fatal("digest changed across a snapshot round trip")
		}
	})
}
