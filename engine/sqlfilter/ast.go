package sqlfilter

import "strings"

// Operator precedence, loosest first. String() adds parentheses only where
// the tree differs from what precedence and left associativity give.
const (
	precOr = iota + 1
	precAnd
	precNot
	precPredicate // comparisons, IN, LIKE, IS NULL, EXISTS
	precAdd
	precMul
	precUnary
	precPrimary
)

// expr is a node that yields a value.
type expr interface {
	eval(m Message) (Value, error)
	format(b *strings.Builder)
	prec() int
}

// pred is a node that yields a truth value.
type pred interface {
	test(m Message) (tri, error)
	format(b *strings.Builder)
	prec() int
}

// tri is a truth value of SQL's three-valued logic.
type tri uint8

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

type (
	literal struct{ v Value }
	param   struct {
		name string // without '@'
		v    Value
	}
	sysProp  struct{ p SystemProperty }
	userProp struct{ name string }
	negate   struct {
		x   expr
		pos int
	}
	arith struct {
		op   byte // + - * / %
		l, r expr
		pos  int
	}
	logic struct {
		or   bool
		l, r pred
	}
	not     struct{ x pred }
	compare struct {
		op   cmpOp
		l, r expr
		pos  int
	}
	inList struct {
		x    expr
		list []expr
		not  bool
		pos  int
	}
	like struct {
		x       expr
		pattern expr // literal or param, kept for String()
		escape  expr // literal, param or nil
		m       likeMatcher
		not     bool
		pos     int
	}
	isNull struct {
		x   expr
		not bool
	}
	exists struct{ prop expr } // sysProp or userProp
)

type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

var cmpOpText = [...]string{opEq: "=", opNe: "<>", opLt: "<", opLe: "<=", opGt: ">", opGe: ">="}

func (*literal) prec() int  { return precPrimary }
func (*param) prec() int    { return precPrimary }
func (*sysProp) prec() int  { return precPrimary }
func (*userProp) prec() int { return precPrimary }
func (*negate) prec() int   { return precUnary }
func (n *arith) prec() int {
	if n.op == '+' || n.op == '-' {
		return precAdd
	}
	return precMul
}
func (n *logic) prec() int {
	if n.or {
		return precOr
	}
	return precAnd
}
func (*not) prec() int     { return precNot }
func (*compare) prec() int { return precPredicate }
func (*inList) prec() int  { return precPredicate }
func (*like) prec() int    { return precPredicate }
func (*isNull) prec() int  { return precPredicate }
func (*exists) prec() int  { return precPredicate }

type formatter interface {
	format(b *strings.Builder)
	prec() int
}

// operand writes x, in parentheses when it binds looser than min.
func operand(b *strings.Builder, x formatter, min int) {
	if x.prec() < min {
		b.WriteByte('(')
		x.format(b)
		b.WriteByte(')')
		return
	}
	x.format(b)
}

func (n *literal) format(b *strings.Builder)  { b.WriteString(n.v.String()) }
func (n *param) format(b *strings.Builder)    { b.WriteString("@" + n.name) }
func (n *sysProp) format(b *strings.Builder)  { b.WriteString(n.p.String()) }
func (n *userProp) format(b *strings.Builder) { b.WriteString(quoteIdent(n.name)) }

func (n *negate) format(b *strings.Builder) {
	b.WriteByte('-')
	operand(b, n.x, precUnary)
}

func (n *arith) format(b *strings.Builder) {
	p := n.prec()
	operand(b, n.l, p)
	b.WriteString(" " + string(n.op) + " ")
	operand(b, n.r, p+1)
}

func (n *logic) format(b *strings.Builder) {
	p := n.prec()
	operand(b, n.l, p)
	if n.or {
		b.WriteString(" OR ")
	} else {
		b.WriteString(" AND ")
	}
	operand(b, n.r, p+1)
}

func (n *not) format(b *strings.Builder) {
	b.WriteString("NOT ")
	operand(b, n.x, precNot)
}

func (n *compare) format(b *strings.Builder) {
	operand(b, n.l, precAdd)
	b.WriteString(" " + cmpOpText[n.op] + " ")
	operand(b, n.r, precAdd)
}

func (n *inList) format(b *strings.Builder) {
	operand(b, n.x, precAdd)
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" IN (")
	for i, e := range n.list {
		if i > 0 {
			b.WriteString(", ")
		}
		operand(b, e, precAdd)
	}
	b.WriteByte(')')
}

func (n *like) format(b *strings.Builder) {
	operand(b, n.x, precAdd)
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" LIKE ")
	n.pattern.format(b)
	if n.escape != nil {
		b.WriteString(" ESCAPE ")
		n.escape.format(b)
	}
}

func (n *isNull) format(b *strings.Builder) {
	operand(b, n.x, precAdd)
	if n.not {
		b.WriteString(" IS NOT NULL")
	} else {
		b.WriteString(" IS NULL")
	}
}

func (n *exists) format(b *strings.Builder) {
	b.WriteString("EXISTS(")
	n.prop.format(b)
	b.WriteByte(')')
}
