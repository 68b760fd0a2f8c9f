package raftlog

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzRecover damages the segment files of a cleanly closed log in ways
// the input chooses (bit flips, zeroed blocks, garbage, files cut short)
// and opens it. Opening must not fail or panic (no file is missing), and
// every group not reported damaged must read back exactly as written: no
// damage may pass unnoticed and lose or change a record. (A group with no
// record left at all after a loss of unknown records is reported through
// Recovery.Unattributed.) The seeds run
// with the ordinary tests; `go test -fuzz FuzzRecover ./raftlog` explores.
//
// Each mutation is eight bytes: segment, kind, offset (u32), value, unused.
func FuzzRecover(f *testing.F) {
	template := corruptionFixture(f)
	segs, _ := filepath.Glob(filepath.Join(template, "*.seg"))
	slices.Sort(segs)
	f.Add([]byte{0, 0, 200, 0, 0, 0, 1, 0})                               // flip in the first segment's first batch
	f.Add([]byte{3, 0, 0, 8, 0, 0, 0x40, 0})                              // flip deep in a sealed segment
	f.Add([]byte{1, 1, 0, 2, 0, 0, 0, 0})                                 // a zeroed block
	f.Add([]byte{2, 2, 0, 6, 0, 0, 0, 0})                                 // a sealed segment cut short
	f.Add([]byte{byte(len(segs) - 1), 2, 0, 1, 0, 0, 0, 0})               // the last one cut short
	f.Add([]byte{byte(len(segs) - 1), 3, 100, 0, 0, 0, 0x5a, 0})          // garbage in the last one
	f.Add([]byte{0, 0, 64, 0, 0, 0, 2, 0, 4, 1, 0, 12, 0, 0, 0, 0})       // two at once
	f.Add([]byte{1, 0, 30, 0, 0, 0, 0x80, 0, 1, 0, 31, 0, 0, 0, 0x80, 0}) // a batch header, twice
	f.Add([]byte{0, 3, 64, 0, 0, 0, 0xff, 0})                             // garbage over the first batch
	f.Add([]byte{byte(len(segs) - 1), 0, 0, 0, 0, 0, 4, 0})               // the last segment's header
	f.Fuzz(func(t *testing.T, muts []byte) {
		dir := t.TempDir()
		var files []string
		for _, s := range segs {
			b, err := os.ReadFile(s)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, filepath.Base(s))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, p)
		}
		b, err := os.ReadFile(filepath.Join(template, closedName))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, closedName), b, 0o644)
		for len(muts) >= 8 {
			m := muts[:8]
			muts = muts[8:]
			path := files[int(m[0])%len(files)]
			data, _ := os.ReadFile(path)
			if len(data) == 0 {
				continue
			}
			off := int(le.Uint32(m[2:])) % len(data)
			switch m[1] % 4 {
			case 0:
				data[off] ^= m[6] | 1
			case 1:
				clear(data[off:min(off+512, len(data))])
			case 2:
				data = data[:off]
			case 3:
				for i := off; i < min(off+64, len(data)); i++ {
					data[i] = m[6]
				}
			}
			os.WriteFile(path, data, 0o644)
		}
		l, err := Open(dir, Options{FS: &faultFS{}, SegmentSize: 4 << 10, RetainBytes: 1 << 30})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer l.Close()
		rec := l.Recovery()
		known := l.Groups()
		want := map[string][3]uint64{"a": {1, 65, 200}, "b": {11, 60, 200}, "c": {1, 2, 50}, "d": {1, 3, 50}}
		for name, w := range want {
			if _, damaged := rec.Damaged[name]; damaged {
				continue
			}
			if rec.Unattributed && !slices.Contains(known, name) {
				// Every record of the group may be among those lost; the
				// owner knows the group existed and treats it as damaged.
				continue
			}
			checkRange(t, openGroup(t, l, name), w[0], w[1], int(w[2]))
			if name == "c" {
				if v, err := openGroup(t, l, "c").GetUint64([]byte("CurrentTerm")); v != 3 || err != nil {
					t.Fatalf("c's term: %d, %v", v, err)
				}
			}
		}
	})
}
