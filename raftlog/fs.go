package raftlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// FS is the file system the log works on: the operating system's by
// default. It is a seam for tests, which substitute one that cuts a write
// short or fails a sync to stand for a crash at that moment.
type FS interface {
	// Create creates a new file for reading and writing; it fails if the
	// file exists.
	Create(name string) (File, error)
	// OpenRW opens an existing file for reading and writing.
	OpenRW(name string) (File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	// List returns the names of the entries of dir.
	List(dir string) ([]string, error)
	MkdirAll(dir string) error
	// SyncDir makes the creations, renames and removals in dir durable.
	SyncDir(dir string) error
	// Lock takes an exclusive lock on the named file (creating it), held
	// until the returned Closer is closed, so that two processes never
	// write one log.
	Lock(name string) (io.Closer, error)
}

// File is one open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes the file's data durable (fdatasync).
	Sync() error
	// Allocate reserves size bytes for the file and sets its size, so
	// that appends within it never change the file's size (one disk write
	// per sync instead of two) and a file cut short is recognisable.
	Allocate(size int64) error
	Size() (int64, error)
	Close() error
}

// OSFS is the operating system's file system.
type OSFS struct{}

var _ FS = OSFS{}

func (OSFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) OpenRW(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (OSFS) Remove(name string) error             { return os.Remove(name) }
func (OSFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o750) }

func (OSFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (OSFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("%s is locked by another process (is another raftbusd using this data dir?)", filepath.Dir(name))
		}
		return nil, err
	}
	return f, nil
}

type osFile struct{ f *os.File }

func (o osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o osFile) Sync() error                              { return datasync(o.f) }
func (o osFile) Allocate(size int64) error                { return allocate(o.f, size) }
func (o osFile) Close() error                             { return o.f.Close() }

// DropCache tells the kernel that the file's pages in [off, off+n) will
// not be read again soon (see Log.dropWritten).
func (o osFile) DropCache(off, n int64) error { return dropCache(o.f, off, n) }

func (o osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
