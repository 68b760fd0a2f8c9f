package sqlfilter

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const (
	// MaxExpressionLength is the longest filter or action expression, in
	// characters, as in Service Bus.
	MaxExpressionLength = 1024
	// MaxNestingDepth bounds parentheses, NOT and unary minus nested in one
	// another, so that no expression can exhaust the stack.
	MaxNestingDepth = 64
)

// Filter is a compiled SQL filter. It is immutable and safe for concurrent
// use.
type Filter struct {
	root pred
}

// Parse compiles a SQL filter expression. Parameters (@name) take their
// values from params, looked up as "@name" and then as "name". The error,
// if any, is a *ParseError.
func Parse(expr string, params map[string]*raftbusv1.PropertyValue) (*Filter, error) {
	return parseFilter(expr, params, MaxExpressionLength)
}

// ParseSQLFilter compiles a SqlFilter rule.
func ParseSQLFilter(f *raftbusv1.SqlFilter) (*Filter, error) {
	return Parse(f.GetSqlExpression(), f.GetParameters())
}

// String returns the filter in canonical form: keywords in upper case,
// system properties spelled as documented, single spaces around operators
// and only the parentheses precedence needs. Parsing it again gives the
// same filter.
func (f *Filter) String() string {
	var b strings.Builder
	f.root.format(&b)
	return b.String()
}

func parseFilter(src string, params map[string]*raftbusv1.PropertyValue, maxLen int) (*Filter, error) {
	p, err := newParser(src, params, maxLen, false)
	if err != nil {
		return nil, err
	}
	t, err := p.parseOr()
	if err == nil {
		err = p.requirePred(t)
	}
	if err == nil && p.tok.kind != tEOF {
		err = p.errExpected("AND, OR or end of input")
	}
	if err != nil {
		return nil, p.finish(err)
	}
	return &Filter{root: t.p}, nil
}

// term is what a parse step yields: a value expression or a predicate
// (a parenthesized condition), and where it starts.
type term struct {
	e   expr
	p   pred
	pos int
}

type parser struct {
	src    string
	lx     lexer
	tok    token // the current token
	prev   token // the token before it, for "after ..." in errors
	params map[string]*raftbusv1.PropertyValue
	depth  int
	action bool
}

func newParser(src string, params map[string]*raftbusv1.PropertyValue, maxLen int, action bool) (*parser, error) {
	p := &parser{src: src, lx: lexer{src: src}, params: params, action: action, prev: token{kind: tEOF, pos: -1}}
	if maxLen > 0 && len(src) > maxLen {
		if n := utf8.RuneCountInString(src); n > maxLen {
			pos := 0
			for i := 0; i < maxLen; i++ {
				_, w := utf8.DecodeRuneInString(src[pos:])
				pos += w
			}
			err := &ParseError{Pos: pos, Expected: "at most " + strconv.Itoa(maxLen) + " characters",
				Found: strconv.Itoa(n) + " characters", Action: action}
			err.locate(src)
			return nil, err
		}
	}
	p.tok = p.lx.next()
	return p, nil
}

func (p *parser) advance() {
	p.prev = p.tok
	p.tok = p.lx.next()
}

// peek returns the token after the current one without consuming it.
func (p *parser) peek() token {
	lx := p.lx
	return lx.next()
}

func (p *parser) finish(err error) error {
	if pe, ok := err.(*ParseError); ok {
		pe.Action = p.action
		pe.locate(p.src)
	}
	return err
}

func (p *parser) errAt(pos int, expected, found string) error {
	return &ParseError{Pos: pos, Expected: expected, Found: found}
}

// errExpected reports that the current token is not what was expected.
func (p *parser) errExpected(expected string) error {
	return p.errAt(p.tok.pos, expected, describe(p.tok, p.src))
}

// errAfter is errExpected with "after <previous token>" appended.
func (p *parser) errAfter(expected string) error {
	if p.prev.pos >= 0 {
		expected += " after " + p.prevText()
	}
	return p.errExpected(expected)
}

func (p *parser) prevText() string {
	switch p.prev.kind {
	case tKeyword, tOp:
		if p.prev.val == "!=" {
			return "'<>'"
		}
		return "'" + p.prev.val + "'"
	}
	return quoteText(p.src[p.prev.pos:p.prev.end])
}

func (p *parser) isOp(op string) bool      { return p.tok.kind == tOp && p.tok.val == op }
func (p *parser) isKeyword(kw string) bool { return p.tok.kind == tKeyword && p.tok.val == kw }

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		return p.errAfter("'" + op + "'")
	}
	p.advance()
	return nil
}

func (p *parser) enter() error {
	if p.depth >= MaxNestingDepth {
		return p.errExpected("at most " + strconv.Itoa(MaxNestingDepth) + " levels of nesting")
	}
	p.depth++
	return nil
}

// requirePred checks that t is a condition. A value expression here lacks
// its operator, which belongs where the current token is.
func (p *parser) requirePred(t term) error {
	if t.p == nil {
		return p.errExpected("comparison operator, IN, LIKE or IS")
	}
	return nil
}

func (p *parser) requireExpr(t term) error {
	if t.e == nil {
		return p.errAt(t.pos, "value expression", "condition")
	}
	return nil
}

func (p *parser) parseOr() (term, error) {
	return p.parseLogic(true)
}

// parseLogic parses OR (or=true) or AND chains, left-associative.
func (p *parser) parseLogic(or bool) (term, error) {
	next, kw := func() (term, error) { return p.parseLogic(false) }, "OR"
	if !or {
		next, kw = p.parseNot, "AND"
	}
	l, err := next()
	if err != nil {
		return l, err
	}
	for p.isKeyword(kw) {
		if err := p.requirePred(l); err != nil {
			return l, err
		}
		p.advance()
		r, err := next()
		if err != nil {
			return r, err
		}
		if err := p.requirePred(r); err != nil {
			return r, err
		}
		l = term{p: &logic{or: or, l: l.p, r: r.p}, pos: l.pos}
	}
	return l, nil
}

func (p *parser) parseNot() (term, error) {
	if !p.isKeyword("NOT") {
		return p.parsePredicate()
	}
	pos := p.tok.pos
	if err := p.enter(); err != nil {
		return term{}, err
	}
	p.advance()
	x, err := p.parseNot()
	if err != nil {
		return x, err
	}
	if err := p.requirePred(x); err != nil {
		return x, err
	}
	p.depth--
	return term{p: &not{x: x.p}, pos: pos}, nil
}

var cmpOps = map[string]cmpOp{"=": opEq, "<>": opNe, "!=": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe}

func (p *parser) parsePredicate() (term, error) {
	if p.isKeyword("EXISTS") {
		return p.parseExists()
	}
	l, err := p.parseAdd()
	if err != nil || l.p != nil {
		return l, err
	}
	pos := p.tok.pos
	if op, ok := cmpOps[p.tok.val]; ok && p.tok.kind == tOp {
		p.advance()
		r, err := p.parseAdd()
		if err != nil {
			return r, err
		}
		if err := p.requireExpr(r); err != nil {
			return r, err
		}
		return term{p: &compare{op: op, l: l.e, r: r.e, pos: pos}, pos: l.pos}, nil
	}
	if p.isKeyword("IS") {
		p.advance()
		n := &isNull{x: l.e}
		if p.isKeyword("NOT") {
			n.not = true
			p.advance()
		}
		if !p.isKeyword("NULL") {
			return l, p.errAfter("NULL")
		}
		p.advance()
		return term{p: n, pos: l.pos}, nil
	}
	negated := false
	if p.isKeyword("NOT") {
		negated = true
		p.advance()
		if !p.isKeyword("IN") && !p.isKeyword("LIKE") {
			return l, p.errAfter("IN or LIKE")
		}
	}
	switch {
	case p.isKeyword("IN"):
		return p.parseIn(l, negated, pos)
	case p.isKeyword("LIKE"):
		return p.parseLike(l, negated, pos)
	}
	return l, nil
}

func (p *parser) parseIn(l term, negated bool, pos int) (term, error) {
	p.advance()
	if err := p.expectOp("("); err != nil {
		return l, err
	}
	n := &inList{x: l.e, not: negated, pos: pos}
	for {
		e, err := p.parseAdd()
		if err != nil {
			return e, err
		}
		if err := p.requireExpr(e); err != nil {
			return e, err
		}
		n.list = append(n.list, e.e)
		if p.isOp(",") {
			p.advance()
			continue
		}
		if !p.isOp(")") {
			return l, p.errExpected("',' or ')'")
		}
		p.advance()
		return term{p: n, pos: l.pos}, nil
	}
}

func (p *parser) parseExists() (term, error) {
	pos := p.tok.pos
	p.advance()
	if err := p.expectOp("("); err != nil {
		return term{}, err
	}
	if p.tok.kind != tIdent && p.tok.kind != tQuoted {
		return term{}, p.errAfter("property")
	}
	prop, err := p.parseProperty()
	if err != nil {
		return term{}, err
	}
	if err := p.expectOp(")"); err != nil {
		return term{}, err
	}
	return term{p: &exists{prop: prop}, pos: pos}, nil
}

func (p *parser) parseAdd() (term, error) {
	return p.parseArith("+-", p.parseMul)
}

func (p *parser) parseMul() (term, error) {
	return p.parseArith("*/%", p.parseUnary)
}

// parseArith parses a left-associative chain of the operators in ops.
func (p *parser) parseArith(ops string, next func() (term, error)) (term, error) {
	l, err := next()
	if err != nil {
		return l, err
	}
	for p.tok.kind == tOp && len(p.tok.val) == 1 && strings.Contains(ops, p.tok.val) {
		if err := p.requireExpr(l); err != nil {
			return l, err
		}
		op, pos := p.tok.val[0], p.tok.pos
		p.advance()
		r, err := next()
		if err != nil {
			return r, err
		}
		if err := p.requireExpr(r); err != nil {
			return r, err
		}
		l = term{e: &arith{op: op, l: l.e, r: r.e, pos: pos}, pos: l.pos}
	}
	return l, nil
}

func (p *parser) parseUnary() (term, error) {
	if !p.isOp("-") && !p.isOp("+") {
		return p.parsePrimary()
	}
	minus, pos := p.isOp("-"), p.tok.pos
	p.advance()
	if minus && (p.tok.kind == tInt || p.tok.kind == tFloat) {
		v, err := p.number(true)
		if err != nil {
			return term{}, err
		}
		p.advance()
		return term{e: &literal{v: v}, pos: pos}, nil
	}
	if err := p.enter(); err != nil {
		return term{}, err
	}
	x, err := p.parseUnary()
	if err != nil {
		return x, err
	}
	if err := p.requireExpr(x); err != nil {
		return x, err
	}
	p.depth--
	if !minus {
		return term{e: x.e, pos: pos}, nil
	}
	// Fold the sign into a number so that the canonical form (which writes
	// -5 for both) reads back as the same tree.
	if lit, ok := x.e.(*literal); ok {
		switch {
		case lit.v.kind == KindInt && lit.v.i != math.MinInt64:
			return term{e: &literal{v: IntValue(-lit.v.i)}, pos: pos}, nil
		case lit.v.kind == KindFloat:
			return term{e: &literal{v: FloatValue(-lit.v.f)}, pos: pos}, nil
		}
	}
	return term{e: &negate{x: x.e, pos: pos}, pos: pos}, nil
}

// number converts the current numeric token, negated when neg.
func (p *parser) number(neg bool) (Value, error) {
	text := p.tok.val
	if neg {
		text = "-" + text
	}
	if p.tok.kind == tInt {
		i, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return Value{}, p.errAt(p.tok.pos, "integer within the int64 range", quoteText(text))
		}
		return IntValue(i), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return Value{}, p.errAt(p.tok.pos, "number within the float64 range", quoteText(text))
	}
	return FloatValue(f), nil
}

func (p *parser) parsePrimary() (term, error) {
	pos := p.tok.pos
	switch p.tok.kind {
	case tInt, tFloat:
		v, err := p.number(false)
		if err != nil {
			return term{}, err
		}
		p.advance()
		return term{e: &literal{v: v}, pos: pos}, nil
	case tString:
		v := StringValue(p.tok.val)
		p.advance()
		return term{e: &literal{v: v}, pos: pos}, nil
	case tKeyword:
		var v Value
		switch p.tok.val {
		case "TRUE":
			v = BoolValue(true)
		case "FALSE":
			v = BoolValue(false)
		case "NULL":
		default:
			return term{}, p.errAfter("expression")
		}
		p.advance()
		return term{e: &literal{v: v}, pos: pos}, nil
	case tParam:
		prm, err := p.param()
		if err != nil {
			return term{}, err
		}
		p.advance()
		return term{e: prm, pos: pos}, nil
	case tIdent, tQuoted:
		e, err := p.parseProperty()
		return term{e: e, pos: pos}, err
	case tOp:
		if p.tok.val != "(" {
			break
		}
		if err := p.enter(); err != nil {
			return term{}, err
		}
		p.advance()
		t, err := p.parseOr()
		if err != nil {
			return t, err
		}
		if !p.isOp(")") {
			return t, p.errExpected("')'")
		}
		p.advance()
		p.depth--
		t.pos = pos
		return t, nil
	}
	return term{}, p.errAfter("expression")
}

// param looks up the current parameter token's value.
func (p *parser) param() (*param, error) {
	name := p.tok.val
	pv, ok := p.params["@"+name]
	if !ok {
		pv, ok = p.params[name]
	}
	if !ok {
		return nil, p.errAt(p.tok.pos, "a value for @"+name+" in the parameters", "none")
	}
	return &param{name: name, v: ValueOf(pv)}, nil
}

// parseProperty parses [sys. | user.] name at the current identifier.
func (p *parser) parseProperty() (expr, error) {
	first := p.tok
	if first.kind == tQuoted {
		p.advance()
		return &userProp{name: first.val}, nil
	}
	next := p.peek()
	if next.kind == tOp && next.val == "(" {
		return nil, p.errAt(first.pos, "property or constant (functions are not supported)",
			"function "+quoteText(first.val))
	}
	if next.kind != tOp || next.val != "." {
		p.advance()
		return &userProp{name: first.val}, nil
	}
	sys := equalFoldASCII(first.val, "sys")
	if !sys && !equalFoldASCII(first.val, "user") {
		return nil, p.errAt(first.pos, "'sys' or 'user' before '.'", quoteText(first.val))
	}
	p.advance()
	p.advance()
	name := p.tok
	if name.kind != tIdent && name.kind != tQuoted {
		return nil, p.errAfter("property name")
	}
	p.advance()
	if !sys {
		return &userProp{name: name.val}, nil
	}
	sp, ok := LookupSystemProperty(name.val)
	if !ok {
		return nil, p.errAt(name.pos, "system property name", quoteText("sys."+name.val))
	}
	return &sysProp{p: sp}, nil
}
