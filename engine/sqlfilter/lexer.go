package sqlfilter

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokenKind uint8

const (
	tEOF     tokenKind = iota
	tBad               // a malformed token; text says what is wrong
	tIdent             // regular identifier; val is its text
	tQuoted            // [delimited] or "quoted" identifier; val is the name
	tKeyword           // val is the upper-case keyword
	tString            // val is the decoded string
	tInt               // val is the digits
	tFloat             // val is the literal
	tParam             // val is the name without '@'
	tOp                // val is the operator or punctuation
)

type token struct {
	kind tokenKind
	pos  int    // byte offset of the first byte
	end  int    // byte offset after the last byte
	val  string // see tokenKind
	bad  string // for tBad: what is wrong
}

var keywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "IN": true, "LIKE": true,
	"ESCAPE": true, "IS": true, "NULL": true, "EXISTS": true,
	"TRUE": true, "FALSE": true,
}

// keyword returns the upper-case keyword name spells (ASCII letters in any
// case), or "".
func keyword(name string) string {
	if len(name) > len("EXISTS") {
		return ""
	}
	var buf [6]byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	if up := string(buf[:len(name)]); keywords[up] {
		return up
	}
	return ""
}

// equalFoldASCII compares two names ignoring the case of ASCII letters
// only, so that no other character can stand in for a keyword's letter.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		c, d := a[i], b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if d >= 'A' && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// lexer produces tokens on demand from src.
type lexer struct {
	src string
	pos int
}

func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }

func isIdentPart(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (l *lexer) next() token {
	src := l.src
	for l.pos < len(src) {
		r, w := utf8.DecodeRuneInString(src[l.pos:])
		if r == utf8.RuneError || !unicode.IsSpace(r) {
			break
		}
		l.pos += w
	}
	start := l.pos
	if start >= len(src) {
		return token{kind: tEOF, pos: start, end: start}
	}
	c := src[start]
	switch {
	case c == '\'':
		return l.quoted(start, '\'', tString, "unterminated string literal")
	case c == '[':
		return l.quoted(start, ']', tQuoted, "unterminated [identifier]")
	case c == '"':
		return l.quoted(start, '"', tQuoted, "unterminated \"identifier\"")
	case isDigit(c):
		return l.number(start)
	case c == '@':
		l.pos++
		name := l.identRun()
		if name == "" {
			return token{kind: tBad, pos: start, end: l.pos, val: "@", bad: "'@' without a parameter name"}
		}
		return token{kind: tParam, pos: start, end: l.pos, val: name}
	}
	if r, _ := utf8.DecodeRuneInString(src[start:]); r != utf8.RuneError && isIdentStart(r) {
		name := l.identRun()
		if kw := keyword(name); kw != "" {
			return token{kind: tKeyword, pos: start, end: l.pos, val: kw}
		}
		return token{kind: tIdent, pos: start, end: l.pos, val: name}
	}
	l.pos++
	op := src[start:l.pos]
	switch c {
	case '(', ')', ',', '=', '+', '-', '*', '/', '%', '.', ';':
	case '<':
		if l.pos < len(src) && (src[l.pos] == '=' || src[l.pos] == '>') {
			l.pos++
		}
		op = src[start:l.pos]
	case '>':
		if l.pos < len(src) && src[l.pos] == '=' {
			l.pos++
		}
		op = src[start:l.pos]
	case '!':
		if l.pos < len(src) && src[l.pos] == '=' {
			l.pos++
			op = "!="
			break
		}
		fallthrough
	default:
		_, w := utf8.DecodeRuneInString(src[start:])
		l.pos = start + w
		return token{kind: tBad, pos: start, end: l.pos, val: src[start:l.pos],
			bad: quoteText(src[start:l.pos])}
	}
	return token{kind: tOp, pos: start, end: l.pos, val: op}
}

// identRun consumes identifier characters and returns them.
func (l *lexer) identRun() string {
	start := l.pos
	for l.pos < len(l.src) {
		r, w := utf8.DecodeRuneInString(l.src[l.pos:])
		if r == utf8.RuneError || !isIdentPart(r) {
			break
		}
		l.pos += w
	}
	return l.src[start:l.pos]
}

// quoted reads a token enclosed in open..closeCh where a doubled closeCh
// stands for itself.
func (l *lexer) quoted(start int, closeCh byte, kind tokenKind, unterminated string) token {
	src := l.src
	i := start + 1
	var b strings.Builder
	plain := true // no doubled quote yet: val is a substring of src
	for i < len(src) {
		if src[i] != closeCh {
			if !plain {
				b.WriteByte(src[i])
			}
			i++
			continue
		}
		if i+1 < len(src) && src[i+1] == closeCh {
			if plain {
				b.WriteString(src[start+1 : i])
				plain = false
			}
			b.WriteByte(closeCh)
			i += 2
			continue
		}
		l.pos = i + 1
		val := src[start+1 : i]
		if !plain {
			val = b.String()
		}
		if kind == tQuoted && val == "" {
			return token{kind: tBad, pos: start, end: l.pos, val: src[start:l.pos], bad: "empty identifier"}
		}
		return token{kind: kind, pos: start, end: l.pos, val: val}
	}
	l.pos = len(src)
	return token{kind: tBad, pos: start, end: l.pos, val: src[start:], bad: unterminated}
}

// number reads digits [. digits] [e [+-] digits].
func (l *lexer) number(start int) token {
	src := l.src
	i := start
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	kind := tInt
	if i+1 < len(src) && src[i] == '.' && isDigit(src[i+1]) {
		kind = tFloat
		i++
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			kind = tFloat
			i = j
			for i < len(src) && isDigit(src[i]) {
				i++
			}
		}
	}
	l.pos = i
	return token{kind: kind, pos: start, end: i, val: src[start:i]}
}

// describe says what a token is, for "found ..." in errors.
func describe(t token, src string) string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tBad:
		return t.bad
	case tString:
		return "string " + shorten(src[t.pos:t.end])
	}
	return quoteText(src[t.pos:t.end])
}

func quoteText(s string) string { return "'" + shorten(s) + "'" }

// shorten keeps error messages readable when a token is long.
func shorten(s string) string {
	const max = 32
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// quoteString writes s as a SQL string literal.
func quoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// isRegularIdent reports whether name can be written without brackets.
func isRegularIdent(name string) bool {
	if name == "" || keyword(name) != "" {
		return false
	}
	for i, r := range name {
		if r == utf8.RuneError || (i == 0 && !isIdentStart(r)) || !isIdentPart(r) {
			return false
		}
	}
	return true
}

// quoteIdent writes a user property name so that it reads back the same.
func quoteIdent(name string) string {
	if isRegularIdent(name) {
		return name
	}
	return "[" + strings.ReplaceAll(name, "]", "]]") + "]"
}
