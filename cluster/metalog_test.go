package cluster

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

func TestMetadataLogChecksEveryEntry(t *testing.T) {
	inner := raft.NewInmemStore()
	logs := checkedLog{inner}
	in := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("conf")},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("put queue orders"), Extensions: []byte("ext")},
		{Index: 3, Term: 2, Type: raft.LogCommand, Data: []byte("put queue invoices")},
	}
	if err := logs.StoreLogs(in); err != nil {
		t.Fatal(err)
	}
	for _, want := range in {
		var got raft.Log
		if err := logs.GetLog(want.Index, &got); err != nil {
			t.Fatalf("entry %d: %v", want.Index, err)
		}
		if got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) {
			t.Fatalf("entry %d read back as %+v, want %+v", want.Index, got, want)
		}
	}
	if in[1].Extensions == nil || string(in[1].Extensions) != "ext" {
		t.Fatal("storing changed the caller's entry")
	}
	if err := logs.verify(); err != nil {
		t.Fatalf("verify: %v", err)
	}

	// A bit flipped in an entry's data on disk.
	var raw raft.Log
	inner.GetLog(2, &raw)
	raw.Data = append([]byte(nil), raw.Data...)
	raw.Data[3] ^= 0x08
	inner.StoreLog(&raw)
	var got raft.Log
	if err := logs.GetLog(2, &got); !errors.Is(err, errMetaEntryDamaged) {
		t.Fatalf("damaged entry read: %v, %q", err, got.Data)
	}
	if err := logs.verify(); !errors.Is(err, errMetaEntryDamaged) {
		t.Fatalf("verify of a damaged log: %v", err)
	}

	// An entry without a checksum.
	inner.StoreLog(&raft.Log{Index: 4, Term: 2, Data: []byte("x")})
	if err := logs.GetLog(4, &got); !errors.Is(err, errMetaEntryDamaged) {
		t.Fatalf("entry without a checksum read: %v", err)
	}
}
