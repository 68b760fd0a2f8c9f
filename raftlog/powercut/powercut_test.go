package powercut_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"slices"
	"testing"

	"github.com/raftbus/raftbus/raftlog"
	"github.com/raftbus/raftbus/raftlog/powercut"
)

func create(t *testing.T, fsys raftlog.FS, name string, data []byte, sync bool) raftlog.File {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func contents(t *testing.T, fsys raftlog.FS, name string) ([]byte, error) {
	t.Helper()
	f, err := fsys.OpenRW(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return buf, nil
}

func TestWhatIsSyncedSurvivesAndNothingElse(t *testing.T) {
	d := powercut.NewDisk(1)
	fsys := d.FS()
	if err := fsys.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	synced := create(t, fsys, "/d/synced", []byte("kept"), true)
	create(t, fsys, "/d/unsynced", []byte("lost"), false)
	if err := fsys.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	// Written after the sync, and a file created after the directory sync.
	if _, err := synced.WriteAt([]byte(" and more"), 4); err != nil {
		t.Fatal(err)
	}
	create(t, fsys, "/d/late", []byte("x"), true)

	d.Cut(0)
	after := d.FS()
	if got, err := contents(t, after, "/d/synced"); err != nil || string(got) != "kept" {
		t.Fatalf("synced file after the cut: %q, %v; want %q", got, err, "kept")
	}
	if got, err := contents(t, after, "/d/unsynced"); err != nil || len(got) != 0 {
		t.Fatalf("unsynced file after the cut: %q, %v; want it empty", got, err)
	}
	if _, err := contents(t, after, "/d/late"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file whose creation was not synced: %v, want it gone", err)
	}
	// The old view writes into a world nobody reads.
	if _, err := synced.WriteAt([]byte("ghost"), 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := contents(t, d.FS(), "/d/synced"); string(got) != "kept" {
		t.Fatalf("a write of the process from before the cut reached the disk: %q", got)
	}
}

func TestUnsyncedSectorsSurviveInPartAndNamespaceChangesInOrder(t *testing.T) {
	sawPart, sawRenameOnly := false, false
	for seed := range uint64(40) {
		d := powercut.NewDisk(seed)
		fsys := d.FS()
		if err := fsys.MkdirAll("/d"); err != nil {
			t.Fatal(err)
		}
		f := create(t, fsys, "/d/a", nil, true)
		if err := fsys.SyncDir("/d"); err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte{7}, 4*512)
		if _, err := f.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Allocate(int64(len(data))); err != nil {
			t.Fatal(err)
		}
		// Two namespace changes: the rename cannot survive without the
		// creation before it.
		create(t, fsys, "/d/b", nil, true)
		if err := fsys.Rename("/d/a", "/d/c"); err != nil {
			t.Fatal(err)
		}
		d.Cut(0.5)
		after := d.FS()
		names, err := after.List("/d")
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case slices.Equal(names, []string{"a"}), slices.Equal(names, []string{"a", "b"}), slices.Equal(names, []string{"b", "c"}):
		default:
			t.Fatalf("seed %d: names %v after a cut: the changes did not survive in order", seed, names)
		}
		sawRenameOnly = sawRenameOnly || slices.Contains(names, "c")
		name := "/d/a"
		if slices.Contains(names, "c") {
			name = "/d/c"
		}
		got, err := contents(t, after, name)
		if err != nil {
			t.Fatal(err)
		}
		kept := bytes.Count(got, []byte{7})
		if kept%512 != 0 {
			t.Fatalf("seed %d: %d bytes of the write survived, not whole sectors", seed, kept)
		}
		sawPart = sawPart || kept > 0 && kept < len(data)
	}
	if !sawPart || !sawRenameOnly {
		t.Fatalf("in 40 cuts, part of a write survived: %v; the later namespace changes survived: %v", sawPart, sawRenameOnly)
	}
}
