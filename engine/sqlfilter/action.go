package sqlfilter

import (
	"errors"
	"strings"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Action is a compiled SQL rule action: SET and REMOVE statements applied,
// in order, to the copy of a message a subscription stores. It is
// immutable and safe for concurrent use.
type Action struct {
	stmts []statement
}

type statement struct {
	remove bool
	sys    SystemProperty // the target when set, else user
	user   string
	value  expr // for SET
	pos    int
}

// ParseAction compiles a rule action such as
//
//	SET sys.Label = 'audited'; SET total = price * quantity; REMOVE secret
//
// Statements are separated by ';' (a trailing one is allowed) and an empty
// expression is an action that does nothing. SET may target application
// properties and the writable system properties (SystemProperty.Writable);
// REMOVE only application properties. The error, if any, is a *ParseError.
func ParseAction(expr string, params map[string]*raftbusv1.PropertyValue) (*Action, error) {
	return parseAction(expr, params, MaxExpressionLength)
}

// ParseSQLRuleAction compiles a SqlRuleAction.
func ParseSQLRuleAction(a *raftbusv1.SqlRuleAction) (*Action, error) {
	return ParseAction(a.GetSqlExpression(), a.GetParameters())
}

func parseAction(src string, params map[string]*raftbusv1.PropertyValue, maxLen int) (*Action, error) {
	p, err := newParser(src, params, maxLen, true)
	if err != nil {
		return nil, err
	}
	a := &Action{}
	for p.tok.kind != tEOF {
		st, err := p.parseStatement()
		if err != nil {
			return nil, p.finish(err)
		}
		a.stmts = append(a.stmts, st)
		if p.isOp(";") {
			p.advance()
			continue
		}
		if p.tok.kind != tEOF {
			return nil, p.finish(p.errExpected("';' or end of input"))
		}
	}
	return a, nil
}

func (p *parser) parseStatement() (statement, error) {
	st := statement{pos: p.tok.pos}
	verb := p.tok
	if verb.kind != tIdent || (!equalFoldASCII(verb.val, "set") && !equalFoldASCII(verb.val, "remove")) {
		return st, p.errAfter("SET or REMOVE")
	}
	st.remove = equalFoldASCII(verb.val, "remove")
	p.advance()
	if p.tok.kind != tIdent && p.tok.kind != tQuoted {
		return st, p.errAfter("property")
	}
	target := p.tok
	prop, err := p.parseProperty()
	if err != nil {
		return st, err
	}
	switch t := prop.(type) {
	case *userProp:
		st.user = t.name
	case *sysProp:
		if st.remove {
			return st, p.errAt(target.pos, "application property (system properties cannot be removed)", quoteText(t.p.String()))
		}
		if !t.p.Writable() {
			return st, p.errAt(target.pos, "writable property", quoteText(t.p.String()))
		}
		st.sys = t.p
	}
	if st.remove {
		return st, nil
	}
	if err := p.expectOp("="); err != nil {
		return st, err
	}
	v, err := p.parseAdd()
	if err != nil {
		return st, err
	}
	if err := p.requireExpr(v); err != nil {
		return st, err
	}
	st.value = v.e
	return st, nil
}

// Apply runs the statements against m in order; each SET sees the changes
// of the ones before it. SET to NULL (or to a missing property) removes an
// application property and clears a system one. A system property can only
// be set to a string. On an *EvalError Apply stops: the statements before
// the failing one have been applied, so callers apply actions to a copy
// they can discard.
func (a *Action) Apply(m MutableMessage) error {
	for _, st := range a.stmts {
		if st.remove {
			m.RemoveUser(st.user)
			continue
		}
		v, err := st.value.eval(m)
		if err != nil {
			var ee *EvalError
			if errors.As(err, &ee) {
				ee.Action = true
			}
			return err
		}
		switch {
		case st.sys != 0:
			if v.kind != KindString && v.kind != KindNull {
				return &EvalError{Pos: st.pos, Op: "SET", Left: KindString, Right: v.kind, Err: ErrTypeMismatch, Action: true}
			}
			m.SetSystem(st.sys, v)
		case v.kind == KindNull:
			m.RemoveUser(st.user)
		default:
			m.SetUser(st.user, v)
		}
	}
	return nil
}

// Len returns the number of statements.
func (a *Action) Len() int { return len(a.stmts) }

// String returns the action in canonical form, statements joined by "; ".
func (a *Action) String() string {
	var b strings.Builder
	for i, st := range a.stmts {
		if i > 0 {
			b.WriteString("; ")
		}
		if st.remove {
			b.WriteString("REMOVE " + quoteIdent(st.user))
			continue
		}
		b.WriteString("SET ")
		if st.sys != 0 {
			b.WriteString(st.sys.String())
		} else {
			b.WriteString(quoteIdent(st.user))
		}
		b.WriteString(" = ")
		st.value.format(&b)
	}
	return b.String()
}
