package test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestREADME runs the README's code blocks, so that the commands a
// newcomer copies keep working. A block is chosen by its fence's info
// string (GitHub highlights by the first word and ignores the rest):
//
//	```sh             run, in order, each block with sh -e from the
//	                  repository root; it must exit 0
//	```sh background  the broker: started in a process group of its own
//	                  before the other blocks, left running while they
//	                  run, stopped by SIGTERM to its PID when they are done
//	```sh norun       shown, never run: the whole test suite (run from
//	                  here it would run this test again)
//	```go             a whole program against client/: written to a
//	                  package of the main module, built and vetted
//	```go norun       a fragment (the azservicebus snippet, which needs
//	                  the test/azsdk module), not compiled here
//
// Blocks of any other info string (```text) are not touched. The blocks
// run with RAFTBUS_ADDR on a free port and RAFTBUS_DATA_DIR in a temp dir,
// the two variables the README's start command honours, so that the test
// neither needs 127.0.0.1:7400 nor touches ./raftbus-data.
func TestREADME(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, filepath.Join(root, "README.md"))
	var background, run, programs []readmeBlock
	suiteSkipped := false
	for _, b := range blocks {
		switch b.info {
		case "sh background":
			background = append(background, b)
		case "sh":
			run = append(run, b)
		case "go":
			programs = append(programs, b)
		case "sh norun":
			suiteSkipped = suiteSkipped || strings.Contains(b.text, "scripts/test.sh")
		}
	}
	if len(background) != 1 || len(run) == 0 || len(programs) == 0 {
		t.Fatalf("the README has %d ```sh background blocks (want 1: the broker), %d ```sh blocks and %d ```go blocks (want some of each)", len(background), len(run), len(programs))
	}
	if !suiteSkipped {
		t.Fatal("the README's scripts/test.sh is not in a ```sh norun block: this test would run the suite, and itself, again")
	}

	t.Run("GoProgram", func(t *testing.T) {
		for _, b := range programs {
			buildReadmeProgram(t, root, b)
		}
	})

	port := readmePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := append(os.Environ(), "RAFTBUS_ADDR="+addr, "RAFTBUS_DATA_DIR="+filepath.Join(t.TempDir(), "data"))

	broker := startReadmeBroker(t, root, env, background[0])
	waitReadmeBroker(t, broker, port+2000)

	var out bytes.Buffer
	for _, b := range run {
		cmd := exec.Command("sh", "-e", "-c", b.text)
		cmd.Dir, cmd.Env = root, env
		var blockOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &blockOut, &blockOut
		if err := runFor(cmd, 3*time.Minute); err != nil {
			t.Fatalf("README line %d: %v\n%s\noutput:\n%s", b.line, err, b.text, blockOut.String())
		}
		out.Write(blockOut.Bytes())
	}
	// What the first-message commands print, as their comments say.
	for _, want := range []string{"created queue orders", "sent 14 bytes to orders", "deliveries=0", "hello, raftbus", "[completed]", "metadata leader"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the README's commands printed no %q; output:\n%s", want, out.String())
		}
	}

	if err := broker.stop(30 * time.Second); err != nil {
		t.Errorf("stopping the broker: %v\nits output:\n%s", err, broker.out.String())
	}
}

// readmeBlock is one fenced code block of the README.
type readmeBlock struct {
	info string // the fence's info string, spaces collapsed
	text string
	line int // of the opening fence
}

func readmeBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []readmeBlock
	var cur *readmeBlock
	var text strings.Builder
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{info: strings.Join(strings.Fields(strings.TrimPrefix(line, "```")), " "), line: n}
			text.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = text.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			text.WriteString(line)
			text.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("README line %d: a code block that is never closed", cur.line)
	}
	return blocks
}

// buildReadmeProgram writes b into a package of the main module (a
// directory whose name starts with _, so that ./... does not see it
// meanwhile) and builds and vets it there.
func buildReadmeProgram(t *testing.T, root string, b readmeBlock) {
	t.Helper()
	dir, err := os.MkdirTemp(filepath.Join(root, "test"), "_readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(b.text), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg := "./" + filepath.ToSlash(must(filepath.Rel(root, dir)))
	for _, args := range [][]string{{"build", "-o", os.DevNull, pkg}, {"vet", pkg}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("README line %d: go %s: %v\n%s", b.line, strings.Join(args, " "), err, out)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// readmePort finds a port p on 127.0.0.1 that is free along with the
// node's other default listeners, HTTP on p+2000 and AMQP on p-1728.
func readmePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(20000)
		var ls []net.Listener
		ok := true
		for _, q := range []int{p, p + 2000, p - 1728} {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free port with its HTTP and AMQP ports free too")
	return 0
}

// readmeBroker is the README's background block, running.
type readmeBroker struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{} // closed when the shell has exited
	err    error         // the shell's exit, once exited is closed
}

func startReadmeBroker(t *testing.T, root string, env []string, b readmeBlock) *readmeBroker {
	t.Helper()
	br := &readmeBroker{out: new(lockedBuffer), exited: make(chan struct{})}
	br.cmd = exec.Command("sh", "-e", "-c", b.text)
	br.cmd.Dir, br.cmd.Env = root, env
	br.cmd.Stdout, br.cmd.Stderr = br.out, br.out
	// Its own process group: go run leaves raftbusd running when it is
	// killed, so the group is what is stopped, by the shell's PID.
	br.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := br.cmd.Start(); err != nil {
		t.Fatalf("README line %d: %v", b.line, err)
	}
	go func() { br.err = br.cmd.Wait(); close(br.exited) }()
	t.Cleanup(func() {
		syscall.Kill(-br.cmd.Process.Pid, syscall.SIGKILL)
		<-br.exited
	})
	return br
}

// waitReadmeBroker waits until the broker's /readyz answers 200 (the
// first go run compiles it, which takes a while).
func waitReadmeBroker(t *testing.T, br *readmeBroker, httpPort int) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort)
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-br.exited:
			t.Fatalf("the README's broker command exited: %v\n%s", br.err, br.out.String())
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the README's broker was not ready at %s within 3 minutes:\n%s", url, br.out.String())
}

// stop sends SIGTERM to the broker's process group, as Ctrl-C or an
// operator would, and waits for every process of it to end.
func (br *readmeBroker) stop(timeout time.Duration) error {
	pgid := br.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			<-br.exited
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("still running %v after SIGTERM", timeout)
}

// lockedBuffer is a bytes.Buffer that a process writes to while the
// test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runFor runs cmd, killing it after timeout.
func runFor(cmd *exec.Cmd, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("still running after %v", timeout)
	}
}
