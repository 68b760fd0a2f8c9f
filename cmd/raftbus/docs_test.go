package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestTheCLIPageCoversEveryCommand keeps docs/cli.md and `raftbus --help`
// the same: every command the help lists is on the page as
// "raftbus <command>", and the page names no command the CLI lacks.
func TestTheCLIPageCoversEveryCommand(t *testing.T) {
	commands := map[string]bool{}
	section := false
	for _, l := range strings.Split(usage, "\n") {
		switch {
		case strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " "):
			// "Entities:", "Messages:", "Cluster:" list commands;
			// "Usage:", "Examples:" and the flags do not.
			section = l == "Entities:" || l == "Messages:" || l == "Cluster:"
		case section && strings.HasPrefix(l, "  "):
			commands[strings.Fields(l)[0]] = true
		}
	}
	if len(commands) < 10 {
		t.Fatalf("found only %v in the usage", commands)
	}
	page, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for cmd := range commands {
		if !regexp.MustCompile(`raftbus ` + cmd + `\b`).Match(page) {
			t.Errorf("docs/cli.md does not show `raftbus %s`", cmd)
		}
	}
	for _, m := range regexp.MustCompile("`raftbus ([a-z]+)").FindAllSubmatch(page, -1) {
		if name := string(m[1]); !commands[name] {
			t.Errorf("docs/cli.md shows `raftbus %s`, which --help does not list", name)
		}
	}
}
