package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestTheOperationsPageDescribesEveryFlag keeps docs/operations.md's flag
// table and --help the same: the same flags, and where the page gives a
// default as a literal, the default --help prints.
func TestTheOperationsPageDescribesEveryFlag(t *testing.T) {
	var help bytes.Buffer
	if _, err := parse([]string{"--help"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	inHelp := map[string]string{} // flag: its default as --help prints it
	flagLine := regexp.MustCompile(`^  -([a-z-]+)`)
	defaultOf := regexp.MustCompile(`\(default "?([^")]*)"?\)$`)
	lines := strings.Split(help.String(), "\n")
	for i, l := range lines {
		m := flagLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		def := ""
		if i+1 < len(lines) {
			if d := defaultOf.FindStringSubmatch(strings.TrimSpace(lines[i+1])); d != nil {
				def = d[1]
			}
		}
		inHelp[m[1]] = def
	}

	page, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	inPage := map[string]bool{}
	row := regexp.MustCompile("^\\| (`--[a-z-]+`(?:, `--[a-z-]+`)*) \\|([^|]*)\\|")
	literal := regexp.MustCompile("^`([^`]*)`$")
	for _, l := range strings.Split(string(page), "\n") {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		names := strings.Split(strings.ReplaceAll(strings.ReplaceAll(m[1], "`", ""), "--", ""), ", ")
		defaults := strings.Split(strings.TrimSpace(m[2]), ", ")
		for i, name := range names {
			inPage[name] = true
			if len(defaults) != len(names) {
				continue
			}
			if d := literal.FindStringSubmatch(defaults[i]); d != nil {
				if got, ok := inHelp[name]; ok && got != d[1] {
					t.Errorf("docs/operations.md gives --%s the default %q, --help %q", name, d[1], got)
				}
			}
		}
	}
	var missing, extra []string
	for name := range inHelp {
		if !inPage[name] {
			missing = append(missing, name)
		}
	}
	for name := range inPage {
		if _, ok := inHelp[name]; !ok {
			extra = append(extra, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("docs/operations.md's flag table lacks %v and has %v, which --help does not", missing, extra)
	}
}
