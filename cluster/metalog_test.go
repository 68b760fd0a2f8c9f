package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
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

// Bits flipped at random in a bbolt file of the metadata log: most land
// where nothing reads, or in an entry whose checksum fails; a few send
// bbolt outside its memory map or to a page of the wrong type. Those must
// come back as an error of the check, like the others, not end the
// process (this test binary) with a fault or a panic.
func TestMetadataLogCheckSurvivesBboltFaults(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "raft.db")
	s, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 400; i++ {
		if err := (checkedLog{s}).StoreLog(&raft.Log{Index: uint64(i), Term: 3, Data: []byte(fmt.Sprintf("entry %d %0200d", i, i))}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	outcomes := map[string]int{}
	for trial := 0; trial < 3000 && outcomes["fault"] < 3; trial++ {
		b := bytes.Clone(clean)
		b[rnd.IntN(len(b))] ^= 1 << rnd.IntN(8)
		p := filepath.Join(dir, fmt.Sprintf("flipped%d.db", trial))
		if err := os.WriteFile(p, b, 0o640); err != nil {
			t.Fatal(err)
		}
		st, err := raftboltdb.NewBoltStore(p)
		if err != nil {
			outcomes["refused by bbolt"]++
			continue
		}
		err = checkedLog{st}.verify()
		switch {
		case err == nil:
			outcomes["clean"]++
		case errors.Is(err, errBoltFault):
			outcomes["fault"]++
		case errors.Is(err, errMetaEntryDamaged):
			outcomes["checksum"]++
		default:
			outcomes["other error"]++
		}
		st.Close()
		os.Remove(p)
	}
	t.Logf("outcomes of flipped bits: %v", outcomes)
	if outcomes["fault"] == 0 {
		t.Fatal("no flipped bit made bbolt fault: the test no longer covers what it is for")
	}
}

var readByte byte

// A bbolt write that faults in its memory map (the file system under it
// gone) is an error the node stops on, not the end of the process, and
// the store is marked so that nobody waits for its lock.
func TestAMetadataWriteThatFaultsIsAnError(t *testing.T) {
	page, err := syscall.Mmap(-1, 0, os.Getpagesize(), syscall.PROT_READ, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Munmap(page); err != nil {
		t.Fatal(err)
	}
	var faulted atomic.Bool
	err = writeGuarded(func() error {
		readByte = page[0] // as bbolt reads a page of a file that is gone
		return nil
	}, &faulted)
	if !errors.Is(err, errBoltFault) || !faulted.Load() {
		t.Fatalf("a write that faulted returned %v (store marked faulted: %v)", err, faulted.Load())
	}
	if err := writeGuarded(func() error { return errors.New("disk full") }, &faulted); err == nil || errors.Is(err, errBoltFault) {
		t.Fatalf("a write that failed returned %v", err)
	}
}
