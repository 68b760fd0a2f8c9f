package sqlfilter

import (
	"strings"
	"unicode/utf8"
)

// likeMatcher is a LIKE pattern compiled once, when the filter is parsed:
// a list of steps matched without allocating. '%' matches any run of
// characters, '_' exactly one character (a UTF-8 sequence), anything else
// itself, byte for byte.
type likeMatcher struct {
	steps []likeStep
	// Shapes that need no backtracking: exact, prefix%, %suffix, %infix%.
	shape likeShape
	lit   string
}

type likeShape uint8

const (
	likeGeneral likeShape = iota
	likeExact
	likePrefix
	likeSuffix
	likeContains
	likeAny // '%' alone (or several)
)

type likeStep struct {
	kind byte   // 'l' literal, '_' one character, '%' any run
	lit  string // for 'l'
}

// compileLike compiles pattern with an optional escape character (hasEsc).
// It returns a description of the fault when an escape character is not
// followed by '%', '_' or itself.
func compileLike(pattern string, esc rune, hasEsc bool) (likeMatcher, string) {
	var steps []likeStep
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			steps = append(steps, likeStep{kind: 'l', lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(pattern); {
		r, w := utf8.DecodeRuneInString(pattern[i:])
		switch {
		case hasEsc && r == esc && (r != utf8.RuneError || w == len(string(esc))):
			j := i + w
			if j >= len(pattern) {
				return likeMatcher{}, "character after the escape character at the end of the LIKE pattern"
			}
			n, nw := utf8.DecodeRuneInString(pattern[j:])
			if n != '%' && n != '_' && n != esc {
				return likeMatcher{}, "'%', '_' or the escape character after the escape character in the LIKE pattern"
			}
			lit.WriteString(pattern[j : j+nw])
			i = j + nw
			continue
		case r == '%':
			flush()
			if len(steps) == 0 || steps[len(steps)-1].kind != '%' {
				steps = append(steps, likeStep{kind: '%'})
			}
		case r == '_':
			flush()
			steps = append(steps, likeStep{kind: '_'})
		default:
			lit.WriteString(pattern[i : i+w])
		}
		i += w
	}
	flush()
	m := likeMatcher{steps: steps}
	m.shape, m.lit = shapeOf(steps)
	return m, ""
}

func shapeOf(steps []likeStep) (likeShape, string) {
	kinds := make([]byte, len(steps))
	for i, s := range steps {
		kinds[i] = s.kind
	}
	switch string(kinds) {
	case "":
		return likeExact, ""
	case "l":
		return likeExact, steps[0].lit
	case "%":
		return likeAny, ""
	case "l%":
		return likePrefix, steps[0].lit
	case "%l":
		return likeSuffix, steps[1].lit
	case "%l%":
		return likeContains, steps[1].lit
	}
	return likeGeneral, ""
}

func (m *likeMatcher) match(s string) bool {
	switch m.shape {
	case likeExact:
		return s == m.lit
	case likePrefix:
		return strings.HasPrefix(s, m.lit)
	case likeSuffix:
		return strings.HasSuffix(s, m.lit)
	case likeContains:
		return strings.Contains(s, m.lit)
	case likeAny:
		return true
	}
	// Greedy matching that backtracks only to the last '%': each '%'
	// retries from one character further on. O(len(s) * len(steps)).
	steps := m.steps
	si, pi := 0, 0
	starStep, starPos := -1, 0
	for pi < len(steps) || si < len(s) {
		if pi < len(steps) {
			switch st := steps[pi]; st.kind {
			case '%':
				starStep, starPos = pi, si
				pi++
				continue
			case '_':
				if si < len(s) {
					_, w := utf8.DecodeRuneInString(s[si:])
					si += w
					pi++
					continue
				}
			default:
				if strings.HasPrefix(s[si:], st.lit) {
					si += len(st.lit)
					pi++
					continue
				}
			}
		}
		if starStep < 0 || starPos >= len(s) {
			return false
		}
		_, w := utf8.DecodeRuneInString(s[starPos:])
		starPos += w
		si, pi = starPos, starStep+1
	}
	return true
}

// likeOperand reads the pattern or escape of LIKE: a string literal or a
// string parameter, known at parse time.
func (p *parser) likeOperand() (expr, string, error) {
	switch p.tok.kind {
	case tString:
		s := p.tok.val
		p.advance()
		return &literal{v: StringValue(s)}, s, nil
	case tParam:
		prm, err := p.param()
		if err != nil {
			return nil, "", err
		}
		if s, ok := prm.v.Str(); ok {
			p.advance()
			return prm, s, nil
		}
		return nil, "", p.errExpected("string parameter")
	}
	return nil, "", p.errAfter("string")
}

func (p *parser) parseLike(l term, negated bool, pos int) (term, error) {
	p.advance()
	patPos := p.tok.pos
	pat, patText, err := p.likeOperand()
	if err != nil {
		return l, err
	}
	n := &like{x: l.e, pattern: pat, not: negated, pos: pos}
	var esc rune
	if p.isKeyword("ESCAPE") {
		p.advance()
		escTok := p.tok
		e, s, err := p.likeOperand()
		if err != nil {
			return l, err
		}
		r, w := utf8.DecodeRuneInString(s)
		if s == "" || w != len(s) || (r == utf8.RuneError && w == 1) {
			return l, p.errAt(escTok.pos, "single-character escape string", describe(escTok, p.src))
		}
		n.escape, esc = e, r
	}
	m, fault := compileLike(patText, esc, n.escape != nil)
	if fault != "" {
		return l, p.errAt(patPos, fault, "string "+shorten(quoteString(patText)))
	}
	n.m = m
	return term{p: n, pos: l.pos}, nil
}
