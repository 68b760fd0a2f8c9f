package raftlog

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

var errLocked = errors.New("locked")

func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

// datasync flushes the file's data and what is needed to read it back,
// not its times. The file is preallocated, so its size needs no record;
// ext4 still writes, on the first sync after writing into blocks
// fallocate reserved, the change that marks them written
// (BenchmarkDatasync).
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// allocate reserves the blocks of the first size bytes and sets the file
// size, falling back to a sparse file where fallocate is not supported.
func allocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return f.Truncate(size)
	}
	return err
}

// dropCache lets the kernel free the page cache of [off, off+n). Only clean
// pages go: those of synced data.
func dropCache(f *os.File, off, n int64) error {
	return unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}
