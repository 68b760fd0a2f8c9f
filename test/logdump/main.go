// Command logdump prints the commands a node's Raft log holds for one
// partition, to find out after a failed run which entry did what: for
// example which committed command settled a lock token the history says
// no settlement reached.
//
//	go run ./test/logdump --data-dir DIR [--group GROUP] [--match HEX]...
//
// Without --group it lists the groups in the log. --match keeps the
// commands whose encoding holds those bytes (a lock token, a receive id,
// a MessageId in hex). The log is opened read-only in spirit: nothing is
// appended, but opening it repairs a torn tail as raftbusd would, so run
// it on a copy of a data dir that matters.
package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	"github.com/raftbus/raftbus/raftlog"
)

type hexList [][]byte

func (h *hexList) String() string { return fmt.Sprint(*h) }
func (h *hexList) Set(s string) error {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil {
		return fmt.Errorf("--match %q: %w", s, err)
	}
	*h = append(*h, b)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "logdump:", err)
		os.Exit(1)
	}
}

func run() error {
	dataDir := flag.String("data-dir", "", "the node's data dir")
	group := flag.String("group", "", "the Raft group (entity@incarnation/partition); empty: list the groups")
	var match hexList
	flag.Var(&match, "match", "hex bytes a printed command must contain (repeatable: any of them)")
	full := flag.Bool("full", false, "print whole commands (bodies included)")
	flag.Parse()
	if *dataDir == "" {
		return errors.New("--data-dir is required")
	}
	l, err := raftlog.Open(filepath.Join(*dataDir, "log"), raftlog.Options{})
	if err != nil {
		return fmt.Errorf("open node log: %w", err)
	}
	defer l.Close()
	if *group == "" {
		for _, g := range l.Groups() {
			fmt.Println(g)
		}
		return nil
	}
	g, err := l.Group(*group)
	if err != nil {
		return fmt.Errorf("group %s: %w", *group, err)
	}
	first, err := g.FirstIndex()
	if err != nil {
		return err
	}
	last, err := g.LastIndex()
	if err != nil {
		return err
	}
	fmt.Printf("# %s: entries %d-%d\n", *group, first, last)
	for i := first; i <= last && i > 0; i++ {
		var entry raft.Log
		if err := g.GetLog(i, &entry); err != nil {
			fmt.Printf("%d: %v\n", i, err)
			continue
		}
		if entry.Type != raft.LogCommand {
			if len(match) == 0 {
				fmt.Printf("%d term %d %s\n", i, entry.Term, entry.Type)
			}
			continue
		}
		var e enginev1.Entry
		if err := proto.Unmarshal(entry.Data, &e); err != nil {
			fmt.Printf("%d term %d: undecodable entry: %v\n", i, entry.Term, err)
			continue
		}
		for k, c := range e.GetCommands() {
			raw, _ := proto.Marshal(c)
			if !matches(raw, match) {
				continue
			}
			if !*full {
				c = withoutBodies(c)
			}
			js, _ := protojson.MarshalOptions{}.Marshal(c)
			fmt.Printf("%d.%d term %d at %s: %s\n", i, k, entry.Term,
				time.UnixMilli(c.GetNowUnixMs()).UTC().Format("15:04:05.000"), js)
		}
	}
	return nil
}

func matches(raw []byte, match hexList) bool {
	if len(match) == 0 {
		return true
	}
	for _, m := range match {
		if bytes.Contains(raw, m) {
			return true
		}
	}
	return false
}

// withoutBodies is c with the message bodies of sends cut, which are
// most of an entry and rarely what one looks for.
func withoutBodies(c *enginev1.Command) *enginev1.Command {
	c = proto.Clone(c).(*enginev1.Command)
	c.TokenSeed = nil
	if s := c.GetSend(); s != nil {
		for _, m := range s.GetMessages() {
			if len(m.GetBody()) > 16 {
				m.Body = append(m.Body[:16:16], "..."...)
			}
		}
	}
	return c
}
