package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesAFileAndLeavesNothingBeside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	for _, content := range []string{"first\n", "second\n"} {
		if err := Write(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", info.Mode(), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the directory holds %v (%v), want the file alone", entries, err)
	}
	if err := Write(filepath.Join(dir, "missing", "key"), []byte("x"), 0o600); err == nil {
		t.Fatal("a write into a directory that does not exist succeeded")
	}
}
